import type { Exception } from 'node-zookeeper-client'
import type { ZooKeeperTransactionLike } from './client-like.js'
import { LockBackendError } from '../../errors.js'
import type { LeaseWatchdog } from '../../lease/watchdog.js'
import { WatchdogHeldLock } from '../watchdog-hold.js'
import { SESSION_EXPIRED, ZK_OK, zkCode, type ZooKeeperCalls } from './calls.js'

/**
 * Owner-checked writes into ZooKeeper: the `resource` of a ZooKeeper lock. Each write is
 * one multi-op that first checks this lock's ephemeral node still exists, so it applies
 * only while this session holds the lock; after a session expiry the server refuses it,
 * whatever the holder believes.
 */
export interface ZooKeeperFencedWrites {
  /** This lock's ephemeral sequential node; its `czxid` is the token. */
  readonly lockPath: string
  /** Sets `data` on the existing node `path` if this lock is still held. Resolves `false` when refused: the lock is gone. */
  setData(path: string, data: Buffer): Promise<boolean>
  /** A transaction that already carries the check, for writes of your own; bound `commit()` yourself. */
  transaction(): ZooKeeperTransactionLike
}

/** @internal Holds the package's own client types: kept out of the published `.d.ts`. */
export class ZooKeeperHeldLock extends WatchdogHeldLock<ZooKeeperFencedWrites> {
  readonly resource: ZooKeeperFencedWrites

  constructor(
    private readonly calls: ZooKeeperCalls,
    lifetime: LeaseWatchdog,
    private readonly lockPath: string,
    token: bigint,
    sessionExpired: AbortSignal,
    onReleased: () => void,
  ) {
    super(lifetime, token, onReleased)
    const transaction = () => calls.client.transaction().check(lockPath)
    this.resource = {
      lockPath,
      transaction,
      setData: async (path, data) => {
        // An expired session can send nothing (its client only answers CONNECTION_LOSS now).
        if (sessionExpired.aborted) return false
        type Outcome = { error: Error | Exception | null; results: { err: number }[] | undefined }
        const { error, results } = await calls.call<Outcome>('owner-checked setData', (cb) =>
          transaction()
            .setData(path, data)
            .commit((error, results) => cb(null, { error, results })),
        )
        if (!error) return true
        // Refused: the check (op 0) failed because our node is gone, or our session is.
        if (zkCode(error) === SESSION_EXPIRED || (results?.[0] && results[0].err !== ZK_OK)) return false
        throw new LockBackendError('zookeeper', `owner-checked write to ${path} failed: ${String(error)}`, error)
      },
    }
  }

  /**
   * Deletes our node, which wakes our successor (and only it); then the key's path if no
   * one else is queued on it, so paths do not pile up per key (a concurrent acquirer
   * that finds it gone creates it again).
   */
  protected async giveBack(): Promise<void> {
    // Retried in the background when it fails: our node would block the queue for the whole session.
    await this.calls.removeEventually(this.lockPath)
    this.calls.remove(this.lockPath.slice(0, this.lockPath.lastIndexOf('/'))).catch(() => {})
  }
}
