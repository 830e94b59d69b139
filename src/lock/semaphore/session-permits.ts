import { LockLostError } from '../../errors.js'
import type { LeaseWatchdog } from '../../lease/watchdog.js'
import { WatchdogHeldLock } from '../watchdog-hold.js'
import type { HeldPermits } from './contract.js'

/**
 * @internal Permits whose life is the store's (an etcd lease, a ZooKeeper session), kept
 * by a `LeaseWatchdog`: `giveBack` removes them from the store with `remove`, and permits
 * lost before the release (someone else may have had them) are reported lost, not released.
 */
export class SessionHeldPermits extends WatchdogHeldLock<void> implements HeldPermits {
  readonly resource = undefined

  constructor(
    private readonly lease: LeaseWatchdog,
    readonly tokens: readonly bigint[],
    private readonly name: string,
    private readonly remove: () => Promise<unknown>,
    onReleased: () => void = () => {},
  ) {
    super(lease, tokens[0]!, onReleased)
  }

  protected async giveBack(): Promise<void> {
    const lost = this.lease.lost
    await this.remove().catch((error: unknown) => {
      if (!lost) throw error
    })
    if (lost) throw new LockLostError(this.name, `its permits were lost before the release (${lost.reason})`)
  }
}
