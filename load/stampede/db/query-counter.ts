/**
 * Counts DB queries in one worker process, in 100 ms bins of absolute time.
 *
 * Why bins of absolute time: the harness draws queries per second across 4+ processes, and
 * performance.timeOrigin + performance.now() is comparable between processes on one
 * machine, so bins from every worker line up without a shared clock service.
 * Why batched: one IPC message per query would cost the `none` mode (thousands of
 * queries per second) more than the queries themselves.
 */
import { BIN_MS, type QueryBins } from '../app/protocol.js'

export const absoluteNow = (): number => performance.timeOrigin + performance.now()

export class QueryCounter {
  /** Bins not yet sent (live updates) and all bins of the run (final answer). */
  private pending: QueryBins = {}
  private all: QueryBins = {}
  private failed = 0

  constructor(readonly runId: string) {}

  /** A query started now (binned by start time: that is when the database feels it). */
  recordQuery(): void {
    const bin = Math.floor(absoluteNow() / BIN_MS)
    this.pending[bin] = (this.pending[bin] ?? 0) + 1
    this.all[bin] = (this.all[bin] ?? 0) + 1
  }

  recordFailure(): void {
    this.failed++
  }

  /** Bins since the last call (for the live progress bar). */
  takePending(): QueryBins {
    const out = this.pending
    this.pending = {}
    return out
  }

  totals(): { bins: QueryBins; failedQueries: number } {
    return { bins: { ...this.all }, failedQueries: this.failed }
  }
}
