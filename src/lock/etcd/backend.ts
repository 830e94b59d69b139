import type { Lease, Namespace } from 'etcd3'
import type { EtcdClientLike } from './client-like.js'
import { setMaxListeners } from 'node:events'
import os from 'node:os'
import { LockBackendError } from '../../errors.js'
import type { AcquireRequest, LockBackend } from '../backend.js'
import type { OneKeyLockBackend } from '../one-key-lock.js'
import type { ReadWriteStore } from '../read-write/store.js'
import { abortable, boundedBackendCall } from '../backend-calls.js'
import { linkedSignal } from '../linked-signal.js'
import { readWhileWaiting, WATCH_POLL_CAP_MS, WATCH_POLL_START_MS } from '../queue-wait.js'
import { LeaseWatchdog } from '../../lease/watchdog.js'
import { EtcdHeldLock, type EtcdFencedWrites } from './held-lock.js'
import { untilDeleted } from './watch.js'
import { EtcdSemaphores } from '../semaphore/etcd/store.js'

/** Where an acquisition puts its key, and which older keys it waits for. */
interface QueuePlace {
  ownKey(leaseHex: string): string
  /** Everyone's keys: the oldest one being ours means nothing older is left, the lock is ours at once. */
  queue: string
  /** The prefix of the older keys that keep us waiting. */
  blockers: string
}

export interface EtcdBackendSettings {
  /** Prefix of every lock key: `<namespace>/<encoded key>/<lease id>`. */
  readonly namespace: string
  /** Bound on each etcd call, ms. */
  readonly commandTimeoutMs: number
}

const OWNER = `${os.hostname()}:${process.pid}`

/**
 * The etcd lock: the Go `concurrency.Mutex` recipe on etcd3's lease and KV calls (not
 * etcd3's `Lock`, which cannot wait and drops the revision).
 *
 * - Acquire: grant a lease (TTL = the lock's lease, rounded up to whole seconds), put
 *   `<namespace>/<key>/<lease id>` under it. The key with the lowest `create_revision`
 *   under `<namespace>/<key>/` holds the lock; every other one watches only the key just
 *   below its own (FIFO, and a release wakes exactly one waiter).
 * - After a wake-up it re-reads its own key: gone means its lease expired while it
 *   waited (the Jepsen finding, etcd-io/etcd#11456), and the attempt fails.
 * - Token: the own key's `create_revision`, which increases across the whole cluster.
 * - Liveness `'session'`: the backend keeps the lease alive from the grant on (through
 *   the wait too) with etcd3's keep-alive, driven by the shared watchdog: every TTL/3,
 *   and a local deadline at `last confirmed keep-alive sent + TTL − margin`. etcd3's own
 *   `lost` event fires only 2 × TTL after the connection dropped (microsoft/etcd3#110),
 *   when the next holder may already be in; the deadline does not wait for it. Loss
 *   aborts `signal` with `LockLostError`.
 * - Every call is bounded by `commandTimeoutMs` (etcd3 calls hang while the cluster has no
 *   quorum) and fails with `LockBackendError('etcd', …)`.
 */
export function createEtcdBackend(
  client: EtcdClientLike,
  settings: EtcdBackendSettings,
): LockBackend<EtcdFencedWrites> {
  return new EtcdBackend(client as unknown as Namespace, settings)
}

class EtcdBackend implements LockBackend<EtcdFencedWrites> {
  readonly name = 'etcd'
  /** Its queue recipe: each waiter watches its predecessor. */
  readonly fifo = 'always'
  private readonly closing = new AbortController()
  private readonly held = new Set<EtcdHeldLock>()
  private readonly calls = {
    call: <T>(what: string, promise: Promise<T>) =>
      boundedBackendCall('etcd', what, promise, this.settings.commandTimeoutMs),
  }

  /** `locks.semaphore()`: the same recipe, counts in the keys (src/lock/semaphore/etcd/). */
  readonly semaphores: EtcdSemaphores

  constructor(
    private readonly client: Namespace,
    private readonly settings: EtcdBackendSettings,
  ) {
    // One listener per acquisition in progress (linkedSignal): no leak to warn of.
    setMaxListeners(0, this.closing.signal)
    this.semaphores = new EtcdSemaphores({
      client,
      namespace: settings.namespace,
      call: this.calls.call,
      keepAlive: (lease, key, ttlMs, at) => this.keepAlive(lease, key, ttlMs, at),
      giveUp: (lease, lifetime) => this.giveUp(lease, lifetime),
      closing: this.closing.signal,
    })
  }

  /** `locks.readWrite()`: etcd's `rwmutex` recipe on the same queue (see {@link readWriteQueue}). */
  readonly readWrite: ReadWriteStore = {
    readers: this.queueSide('read'),
    writers: this.queueSide('write'),
    close: async () => {},
  }

  acquire(request: AcquireRequest): Promise<EtcdHeldLock | undefined> {
    const queue = `${this.settings.namespace}/${encodeURIComponent(request.key)}/`
    return this.acquireQueued(request, { ownKey: (lease) => queue + lease, queue, blockers: queue })
  }

  /**
   * One side of a read-write lock: keys `<namespace>/%rw/<encoded name>/read-<lease>` and
   * `…/write-<lease>` (`%rw` is never an encoded key, so no mutex, semaphore or election
   * prefix covers them). A reader waits until no older *write* key is left, a writer until
   * no older key at all. So a reader that comes after a waiting writer waits for it: a
   * stream of readers cannot starve a writer, and everyone is served in arrival order,
   * readers that arrive together sharing.
   */
  private queueSide(side: 'read' | 'write'): OneKeyLockBackend<EtcdFencedWrites> {
    return {
      name: 'etcd',
      fifo: 'always',
      acquire: (request) => {
        const queue = `${this.settings.namespace}/%rw/${encodeURIComponent(request.key)}/`
        const blockers = side === 'read' ? `${queue}write-` : queue
        return this.acquireQueued(request, { ownKey: (lease) => `${queue}${side}-${lease}`, queue, blockers })
      },
      close: async () => {},
    }
  }

  private async acquireQueued(request: AcquireRequest, place: QueuePlace): Promise<EtcdHeldLock | undefined> {
    if (this.closing.signal.aborted) throw new LockBackendError('etcd', 'the backend is closed')
    const deadline = performance.now() + request.waitMs
    const { queue } = place
    const ttlSeconds = Math.max(1, Math.ceil(request.leaseMs / 1_000))
    const grantSentAt = performance.now()
    const lease = this.client.lease(ttlSeconds, { autoKeepAlive: false })
    const lifetime = this.keepAlive(lease, request.key, ttlSeconds * 1_000, grantSentAt)
    const linked = linkedSignal([request.signal, this.closing.signal, lifetime.signal])
    const waiting = linked.signal
    const call = <T>(what: string, promise: Promise<T>) => abortable(this.calls.call(what, promise), waiting, () => {})
    let acquired = false
    let stage = 'grant a lease'
    try {
      const leaseId = await call(stage, lease.grant())
      const ownKey = place.ownKey(BigInt(leaseId).toString(16))
      stage = 'put the lock key'
      // One txn puts our key and reads the oldest key: when that is ours, the lock is taken in this round trip.
      const put = await call(
        stage,
        this.client
          .if(ownKey, 'Create', '==', 0)
          .then(
            this.client
              .put(ownKey)
              .value(request.label ?? OWNER)
              .lease(leaseId),
            this.client.getAll().prefix(queue).sort('Create', 'Ascend').limit(1),
          )
          .commit(),
      )
      if (!put.succeeded)
        throw new LockBackendError('etcd', `the lock key ${ownKey} already exists under a fresh lease`)
      const revision = BigInt(put.header.revision)
      const oldest = put.responses[1]?.response_range?.kvs[0]
      stage = 'wait for the lock'
      if (
        oldest?.create_revision !== revision.toString() &&
        !(await this.waitForTurn(place.blockers, ownKey, revision, deadline, waiting))
      )
        return undefined
      acquired = true
      const held = new EtcdHeldLock(this.client, this.calls, lease, lifetime, ownKey, revision, () =>
        this.held.delete(held),
      )
      this.held.add(held)
      return held
    } catch (err) {
      if (request.signal.aborted) throw request.signal.reason
      if (this.closing.signal.aborted) throw new LockBackendError('etcd', 'the backend was closed while waiting')
      if (lifetime.lost)
        throw new LockBackendError(
          'etcd',
          `the lease ended before the lock was taken (trying to ${stage}): ${lifetime.lost.reason}`,
        )
      throw err
    } finally {
      linked.dispose()
      if (!acquired) this.giveUp(lease, lifetime)
    }
  }

  /**
   * Waits until no key older than ours is left under `queue` (the lock's prefix, or a
   * read-write lock's write keys). `false` when the
   * wait ran out first. Watches one predecessor at a time; a bounded, backed-off re-read
   * is the safety net should a watch stay silent.
   *
   * Each look at the queue is one txn: if our own key still has our revision, read the
   * newest older key. So every wake-up re-reads our own key (gone: our lease expired
   * while we waited, etcd-io/etcd#11456) in the same round trip as the queue.
   */
  private async waitForTurn(
    queue: string,
    ownKey: string,
    revision: bigint,
    deadline: number,
    signal: AbortSignal,
  ): Promise<boolean> {
    const predecessorOf = this.client
      .getAll()
      .prefix(queue)
      .maxCreateRevision((revision - 1n).toString())
      .sort('Create', 'Descend')
      .limit(1)
    let pollMs = WATCH_POLL_START_MS
    for (;;) {
      // Tried again through a leader election or a member going down (etcd3 moves to another member).
      const res = await readWhileWaiting(
        () =>
          this.calls.call(
            'read the lock queue',
            this.client.if(ownKey, 'Create', '==', revision.toString()).then(predecessorOf).commit(),
          ),
        deadline,
        (err) => !signal.aborted && err instanceof LockBackendError,
        (promise) => abortable(promise, signal, () => {}),
      )
      if (!res.succeeded)
        throw new LockBackendError(
          'etcd',
          'the own lock key is gone: its lease expired while it waited (etcd-io/etcd#11456)',
        )
      const predecessor = res.responses[0]?.response_range?.kvs[0]
      if (!predecessor) return true
      const remaining = deadline - performance.now()
      if (remaining <= 0) return false
      // Txn replies carry full key names; the watch adds the client's namespace itself.
      const key = predecessor.key.subarray(this.client.prefix.length)
      const outcome = await this.waitForDelete(
        key,
        BigInt(res.header.revision) + 1n,
        Math.min(remaining, pollMs),
        signal,
      )
      if (outcome === 'silent') pollMs = Math.min(pollMs * 2, WATCH_POLL_CAP_MS)
    }
  }

  /** Resolves when `key` is deleted (from `fromRevision` on), after `ms` ('silent'), or on abort. */
  private waitForDelete(
    key: Buffer,
    fromRevision: bigint,
    ms: number,
    signal: AbortSignal,
  ): Promise<'deleted' | 'silent'> {
    if (signal.aborted) return Promise.reject(signal.reason)
    return untilDeleted(this.client.watch().key(key).startRevision(fromRevision.toString()).watcher(), ms, signal)
  }

  /**
   * Keeps `lease` alive from its grant on. The server started the TTL no earlier than
   * `grantSentAt`, and each confirmed keep-alive no earlier than it was sent: the
   * watchdog's deadline, counted from those instants, is never late.
   */
  private keepAlive(lease: Lease, key: string, ttlMs: number, grantSentAt: number): LeaseWatchdog {
    const watchdog = new LeaseWatchdog({
      key,
      leaseMs: ttlMs,
      startedAt: grantSentAt,
      renew: async () => {
        const res = await this.calls.call('keep the lease alive', lease.keepaliveOnce())
        return Number(res.TTL) > 0
      },
    })
    // etcd said the lease is gone (expired, revoked, or never granted).
    lease.on('lost', (err) => watchdog.lose(`etcd reports the lease lost (${err.message})`))
    return watchdog
  }

  /** Revokes the lease, which deletes our key (if it was put) in the same revision. */
  private giveUp(lease: Lease, lifetime: LeaseWatchdog): void {
    void lifetime.stop()
    this.calls.call('revoke the lease', lease.revoke()).catch(() => {
      // Unreachable etcd: the lease, and the key with it, expire after one TTL.
    })
  }

  async close(): Promise<void> {
    this.closing.abort()
    await Promise.allSettled([...this.held].map((held) => held.release()))
  }
}
