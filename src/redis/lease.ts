import { LockLostError } from '../errors.js'
import type { EntryKeys } from './keys.js'
import type { RedisStore } from './store.js'

/**
 * The watchdog of a held lock (Redisson's idea): renews the lease every lease/3
 * while the loader runs, up to `maxHoldMs`. When the lock is lost — taken over,
 * expired while Redis was unreachable, or held too long — it aborts `signal` so the
 * loader can stop; it never throws from a timer. The fenced commit keeps the stored
 * value correct whatever happens here: this lock is only about efficiency.
 */
export class Lease {
  private readonly controller = new AbortController()
  private readonly timer: NodeJS.Timeout
  private readonly startedAt = performance.now()
  private lastRenewedAt = this.startedAt
  private renewal: Promise<void> | undefined
  private stopped = false

  constructor(
    private readonly store: RedisStore,
    private readonly keys: EntryKeys,
    private readonly lockValue: string,
    private readonly leaseMs: number,
    private readonly maxHoldMs: number,
    private readonly key: string,
    private readonly onLost: (reason: string) => void,
  ) {
    this.timer = setInterval(() => this.tick(), Math.max(10, Math.floor(leaseMs / 3)))
    this.timer.unref()
  }

  get signal(): AbortSignal {
    return this.controller.signal
  }

  private tick(): void {
    if (this.stopped || this.renewal) return
    const now = performance.now()
    if (now - this.startedAt >= this.maxHoldMs) return this.lose('held longer than lock.maxHold')
    this.renewal = this.store.extend(this.keys, this.lockValue, this.leaseMs).then(
      (renewed) => {
        if (renewed) {
          this.lastRenewedAt = now
        } else {
          this.lose('the lock expired or was taken by another process')
        }
      },
      () => {
        // Redis unreachable: the lock survives until its lease runs out.
        if (performance.now() - this.lastRenewedAt >= this.leaseMs) this.lose('could not renew the lease before it expired')
      },
    ).finally(() => {
      this.renewal = undefined
    })
  }

  private lose(reason: string): void {
    if (this.stopped) return
    this.stopped = true
    clearInterval(this.timer)
    this.onLost(reason)
    this.controller.abort(new LockLostError(this.key, reason))
  }

  /** Stops renewing and waits for a renewal in flight, so it cannot race the release. */
  async stop(): Promise<void> {
    this.stopped = true
    clearInterval(this.timer)
    await this.renewal
  }
}
