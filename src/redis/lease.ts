import { LeaseWatchdog } from '../lock/watchdog.js'
import type { EntryKeys } from './keys.js'
import type { RedisStore } from './store.js'

/**
 * The cache leader's lease: the shared `LeaseWatchdog` renewing the entry's lock with
 * `extend.lua` while the loader runs, up to `maxHoldMs`. When the lock is lost (taken
 * over, expired while Redis was unreachable, held too long) it aborts `signal` so the
 * loader can stop. The fenced commit keeps the stored value correct whatever happens
 * here: this lock is only about efficiency.
 */
export class Lease {
  private readonly watchdog: LeaseWatchdog

  /** `lockedAt`: `performance.now()` when the lookup that took the lock was sent. */
  constructor(store: RedisStore, keys: EntryKeys, lockValue: string, leaseMs: number, maxHoldMs: number, key: string, lockedAt: number, onLost: (reason: string) => void) {
    this.watchdog = new LeaseWatchdog({
      key,
      leaseMs,
      startedAt: lockedAt,
      maxHoldMs,
      renew: (ms) => store.extend(keys, lockValue, ms),
      onLost: (error) => onLost(error.reason),
    })
  }

  get signal(): AbortSignal {
    return this.watchdog.signal
  }

  /** Stops renewing and waits for a renewal in flight, so it cannot race the release. */
  stop(): Promise<void> {
    return this.watchdog.stop()
  }
}
