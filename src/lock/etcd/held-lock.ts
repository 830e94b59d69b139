import type { ComparatorBuilder, Lease, Namespace } from 'etcd3'
import type { EtcdTxnLike } from './client-like.js'
import type { LeaseWatchdog } from '../../lease/watchdog.js'
import { WatchdogHeldLock } from '../watchdog-hold.js'

/**
 * Owner-checked writes into etcd: the `resource` of an etcd lock. Each write is one txn
 * that first compares this lock's key's `create_revision` with the token, so it commits
 * only while the key still exists — i.e. while this lock is held. Once the lease has
 * expired (a paused or partitioned holder), etcd refuses the write whatever the holder
 * believes. No clock is involved.
 */
export interface EtcdFencedWrites {
  /** This lock's own key in etcd (relative to the client's namespace); its `create_revision` is the token. */
  readonly lockKey: string
  /** Puts `value` at `key` if this lock is still held. Resolves `false` when etcd refused it: the lock is gone. */
  put(key: string | Buffer, value: string | Buffer): Promise<boolean>
  /** Deletes `key` if this lock is still held. Resolves `false` when refused. */
  delete(key: string | Buffer): Promise<boolean>
  /**
   * A txn that already carries the ownership comparison, for writes of your own:
   * `txn().and(…).then(client.put(k).value(v)).else(…).commit()`; `succeeded` is `false`
   * when refused. Bound `commit()` yourself.
   */
  txn(): EtcdTxnLike
}

export interface EtcdCalls {
  call<T>(what: string, promise: Promise<T>): Promise<T>
}

/** @internal Holds etcd3's own types: kept out of the published `.d.ts`. */
export class EtcdHeldLock extends WatchdogHeldLock<EtcdFencedWrites> {
  readonly resource: EtcdFencedWrites

  constructor(
    client: Namespace,
    private readonly calls: EtcdCalls,
    private readonly lease: Lease,
    lifetime: LeaseWatchdog,
    lockKey: string,
    token: bigint,
    onReleased: () => void,
  ) {
    super(lifetime, token, onReleased)
    const revision = token.toString()
    const owned = () => client.if(lockKey, 'Create', '==', revision)
    const committed = (what: string, txn: ComparatorBuilder) =>
      calls.call(what, txn.commit()).then((res) => res.succeeded)
    this.resource = {
      lockKey,
      put: (key, value) => committed('owner-checked put', owned().then(client.put(key).value(value))),
      delete: (key) => committed('owner-checked delete', owned().then(client.delete().key(key))),
      txn: owned,
    }
  }

  /** Revokes the lease: etcd deletes our key in the same revision, which wakes our successor. */
  protected async giveBack(): Promise<void> {
    await this.calls.call('revoke the lease', this.lease.revoke())
  }
}
