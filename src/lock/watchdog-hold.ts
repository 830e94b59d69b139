import type { HeldLock } from './backend.js'
import type { LeaseWatchdog } from '../lease/watchdog.js'

/**
 * A held lock whose store-side lifetime (an etcd lease, a ZooKeeper session) the backend
 * confirms itself with a `LeaseWatchdog`, so the front sees liveness `'session'`: `signal`
 * is the watchdog's, `renew()` confirms now, and `release()` stops the watchdog (waiting
 * for a confirmation in flight) before `giveBack()` tells the store. Release is idempotent.
 */
export abstract class WatchdogHeldLock<Resource> implements HeldLock<Resource> {
  readonly liveness = 'session' as const
  abstract readonly resource: Resource
  private released: Promise<void> | undefined

  constructor(
    private readonly lifetime: LeaseWatchdog,
    readonly token: bigint,
    private readonly onReleased: () => void,
  ) {}

  get signal(): AbortSignal {
    return this.lifetime.signal
  }

  /** Confirms the lease or session now (the watchdog does so every third of it anyway); `false` once lost or released. */
  renew(): Promise<boolean> {
    if (this.released) return Promise.resolve(false)
    return this.lifetime.extend()
  }

  validForMs(): number {
    return this.released ? 0 : this.lifetime.validForMs
  }

  release(): Promise<void> {
    this.released ??= (async () => {
      await this.lifetime.stop()
      this.onReleased()
      await this.giveBack()
    })()
    return this.released
  }

  /** Removes the lock from the store; bounded, rejecting with the backend's typed error. */
  protected abstract giveBack(): Promise<void>
}
