import { batchesOf, repliesFor, TickQueue } from './batches.js'

/** Most locks one extend-many.lua call renews: a larger call blocks Redis for longer. */
const MAX_RENEWALS_PER_CALL = 500

interface Renewal {
  readonly lock: string
  readonly value: string
  readonly leaseMs: number
  resolve(renewed: boolean): void
  reject(error: unknown): void
}

/**
 * The lease renewals of one tick, sent as one extend-many.lua call (per slot on a
 * Cluster, at most `MAX_RENEWALS_PER_CALL` locks each), instead of one call per lock. The
 * watchdogs' renewal times are aligned (src/lease/watchdog.ts), so the locks a process holds
 * come due together. Each renewal is still answered on its own: a lock found lost is that
 * lock's `false` (its watchdog aborts its signal), and a failed call rejects the renewals it
 * carried, each retried by its own watchdog.
 */
export class RenewalBatch {
  private readonly pending = new TickQueue<Renewal>((due) => this.flush(due))

  /**
   * `send(locks, args)`: one extend-many.lua call (`args`: value and lease of each lock, in
   * order), resolving its reply. `keyOf` on a Cluster: a lock's full key (for its slot).
   */
  constructor(
    private readonly send: (locks: string[], args: (string | number)[]) => Promise<unknown>,
    private readonly keyOf?: (lock: string) => string,
  ) {}

  /** Resolves `true` when extended, `false` when the lock is no longer ours; rejects when the call failed. */
  renew(lock: string, value: string, leaseMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => this.pending.push({ lock, value, leaseMs, resolve, reject }))
  }

  private flush(due: Renewal[]): void {
    for (const batch of batchesOf(due, MAX_RENEWALS_PER_CALL, this.keyOf && ((renewal) => this.keyOf!(renewal.lock)))) {
      repliesFor(batch.length, 'extend-many', () =>
        this.send(
          batch.map((renewal) => renewal.lock),
          batch.flatMap((renewal) => [renewal.value, renewal.leaseMs]),
        ),
      )
        .then((reply) => batch.forEach((renewal, i) => renewal.resolve(Number(reply[i]) === 1)))
        .catch((error: unknown) => batch.forEach((renewal) => renewal.reject(error)))
    }
  }
}
