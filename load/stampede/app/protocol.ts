/**
 * Messages between the harness, the cluster primary and the worker processes.
 *
 * harness ──fork IPC──▶ primary ──cluster IPC──▶ workers
 *
 * The primary only relays and sums: every decision (which mode, when the DB turns flaky)
 * is the harness's, so a run is described in one place (load/stampede/harness.ts).
 */
import type { ModeCacheOptions } from '../modes.js'

/** One (scenario, mode) run as the workers see it. */
export interface RunConfig {
  /** Unique per run: DB queries are attributed to the run whose cache started them. */
  runId: string
  /** A ModeName for load/stampede/app/item-loader.ts; a loader module named by LOAD_ITEM_LOADER (load/compare/) has its own names. */
  mode: string
  /** Prefix of every Redis key this run writes, so runs never see each other's entries. */
  namespace: string
  cache: ModeCacheOptions
  /** Latency of one DB query in ms (built-in source: a timer; PostgreSQL: pg_sleep). */
  dbLatencyMs: number
  /** Time each miss's phases and count its Redis commands (load/stampede/app/miss-probe.ts). */
  probe?: boolean
}

/** Per-process DB query counts: 100 ms bins of absolute time (performance.timeOrigin + now). */
export interface QueryBins {
  /** bin index = floor(absoluteMs / BIN_MS) → queries started in that bin. */
  [bin: number]: number
}
export const BIN_MS = 100

export type HarnessToPrimary =
  | { type: 'configure'; run: RunConfig }
  | { type: 'db-failure-rate'; rate: number }
  | { type: 'collect'; runId: string }
  | { type: 'shutdown' }

export type PrimaryToHarness =
  | { type: 'ready'; port: number; workers: number }
  | { type: 'configured'; runId: string }
  /** Live, partial counts (for the progress bar); the final numbers come with 'collected'. */
  | { type: 'queries'; runId: string; bins: QueryBins }
  | {
      type: 'collected'
      runId: string
      bins: QueryBins
      failedQueries: number
      stats: Record<string, number>
      oldestServedMs: number
      /** CPU time (user + system, ms) the worker(s) used since the run was configured. */
      cpuMs: number
      /** One per worker, when the run was probed. */
      probes: ProbeReport[]
    }
  | { type: 'fatal'; message: string }

export type PrimaryToWorker =
  { type: 'configure'; run: RunConfig } | { type: 'db-failure-rate'; rate: number } | { type: 'collect'; runId: string }

export type WorkerToPrimary =
  | { type: 'listening'; port: number }
  | { type: 'configured'; runId: string }
  | { type: 'queries'; runId: string; bins: QueryBins }
  | {
      type: 'collected'
      runId: string
      bins: QueryBins
      failedQueries: number
      stats: Record<string, number>
      oldestServedMs: number
      /** CPU time (user + system, ms) the worker(s) used since the run was configured. */
      cpuMs: number
      probe?: ProbeReport
    }
  | { type: 'fatal'; message: string }

/** Adds b's counts into a (in place). */
export function mergeBins(a: QueryBins, b: QueryBins): QueryBins {
  for (const [bin, n] of Object.entries(b)) a[Number(bin)] = (a[Number(bin)] ?? 0) + n
  return a
}

/** Sums numeric fields; non-numeric fields (if a stats object has any) are ignored. */
export function mergeStats(a: Record<string, number>, b: Record<string, unknown>): Record<string, number> {
  for (const [k, v] of Object.entries(b)) if (typeof v === 'number') a[k] = (a[k] ?? 0) + v
  return a
}

/** What a worker sends with its counts when the run was probed. */
export interface ProbeReport {
  /** Phase name → durations in ms (a uniform sample). */
  samples: Record<string, number[]>
  /** Command kind (get, mget, a script's name, set, eval…) → commands sent. */
  commands: Record<string, number>
  /** The worker's event-loop delay over the run (ms): a reply waits this long to be read. */
  loopDelay: { p50: number; p99: number; max: number }
  /** CPU time this worker used over the run (user + system, ms). */
  cpuMs: number
  /** Requests the probe saw, and the flights among them that sent no command (answered from L1). */
  requests: number
  flights: number
  flightsWithoutRedis: number
  /** Item → request arrival times (absolute ms, one per ms at most): the harness's ideal load count. */
  arrivals: Record<string, number[]>
  /** Item → when its commits were answered (absolute ms). */
  commits: Record<string, number[]>
  /** [item, absolute ms] of each wait that ended with the other process's value. */
  wakes: [string, number][]
}
