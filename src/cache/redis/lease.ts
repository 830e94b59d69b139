import { LeaseWatchdog } from '../../lease/watchdog.js'
import type { EntryKeys } from './keys.js'
import type { RedisStore } from './store.js'

/**
 * The cache leader's lease: the shared `LeaseWatchdog` renewing the entry's lock
 * (extend-many.lua, batched with the process's other renewals) while the loader runs and
 * its result is written, up to `maxHoldMs`. When the lock is lost (taken
 * over, expired while Redis was unreachable, held too long) it aborts `signal` so the
 * loader can stop. The fenced commit keeps the stored value correct whatever happens
 * here: this lock is only about efficiency.
 */
export class Lease {
  private readonly watchdog: LeaseWatchdog
  private storing = false

  /** `lockedAt`: `performance.now()` when the lookup that took the lock was sent. */
  constructor(
    store: RedisStore,
    keys: EntryKeys,
    lockValue: string,
    leaseMs: number,
    maxHoldMs: number,
    key: string,
    lockedAt: number,
    onLost: (reason: string) => void,
  ) {
    this.watchdog = new LeaseWatchdog({
      key,
      leaseMs,
      startedAt: lockedAt,
      maxHoldMs,
      renew: (ms) => store.extend(keys, lockValue, ms),
      onLost: (error) => {
        if (!this.storing) onLost(error.reason)
      },
    })
  }

  /**
   * The loader is done and its result (or failure) is being written: the lease is still
   * renewed until `stop()`, since a write queued behind a burst of others may take longer than
   * the lease (20,000 commits at once did, and another process took the locks and loaded
   * again). A loss found now is no news: the write deletes the lock itself, and a late one is
   * fenced.
   */
  storingResult(): void {
    this.storing = true
  }

  get signal(): AbortSignal {
    return this.watchdog.signal
  }

  /** Stops renewing (once the result is written) and waits for a renewal in flight. */
  stop(): Promise<void> {
    return this.watchdog.stop()
  }
}
