import type { ITxnResponse, Lease, Namespace } from 'etcd3'
import { LockBackendError } from '../../../errors.js'
import { abortable } from '../../backend-calls.js'
import { linkedSignal } from '../../linked-signal.js'
import { readWhileWaiting, WATCH_POLL_CAP_MS, WATCH_POLL_START_MS } from '../../queue-wait.js'
import type { LeaseWatchdog } from '../../../lease/watchdog.js'
import { SessionHeldPermits } from '../session-permits.js'
import { untilDeleted } from '../../etcd/watch.js'
import { tokensOfHolder, type HeldPermits, type SemaphoreRequest, type SemaphoreStore } from '../contract.js'

/** @internal What the etcd lock backend lends its semaphores: its bounded calls and its lease keep-alive. */
export interface EtcdSemaphoreParts {
  readonly client: Namespace
  readonly namespace: string
  call<T>(what: string, promise: Promise<T>): Promise<T>
  /** The backend's lease watchdog (keep-alive every TTL/3, local deadline). */
  keepAlive(lease: Lease, key: string, ttlMs: number, grantSentAt: number): LeaseWatchdog
  /** Revokes a lease it gave up on (unreachable etcd: it expires after one TTL). */
  giveUp(lease: Lease, lifetime: LeaseWatchdog): void
  readonly closing: AbortSignal
}

/**
 * Counting semaphores on etcd, on the lock's recipe: each acquirer puts
 * `<namespace>/<name>/s/<lease id>` = its count under a lease of its own, in one txn. The
 * keys form one FIFO line by `create_revision`, holders and waiters alike, and an acquirer
 * holds its permits once the counts of every key older than its own plus its own fit in
 * `permits`. Holders are all older than any waiter, and keys older than one only ever
 * leave, so at most `permits` are held at any revision and a holder stays a holder. A
 * waiter watches the prefix for deletions of older keys only (a release behind it does not
 * wake it) and re-reads; a re-read also checks its own key is still there (etcd-io/etcd#11456).
 * Token per permit: `create_revision × 10,000 + i`. Liveness: the lease, kept alive by the
 * backend's watchdog: a crashed holder's permits come back when its lease expires.
 */
export class EtcdSemaphores implements SemaphoreStore {
  /** @internal */
  constructor(private readonly parts: EtcdSemaphoreParts) {}

  async acquire(request: SemaphoreRequest): Promise<HeldPermits | undefined> {
    const { client, call } = this.parts
    if (this.parts.closing.aborted) throw new LockBackendError('etcd', 'the backend is closed')
    const deadline = performance.now() + request.waitMs
    const line = `${this.parts.namespace}/${encodeURIComponent(request.name)}/s/`
    const ttlSeconds = Math.max(1, Math.ceil(request.leaseMs / 1_000))
    const grantSentAt = performance.now()
    const lease = client.lease(ttlSeconds, { autoKeepAlive: false })
    const lifetime = this.parts.keepAlive(lease, request.name, ttlSeconds * 1_000, grantSentAt)
    const linked = linkedSignal([request.signal, this.parts.closing, lifetime.signal])
    const step = <T>(promise: Promise<T>) => abortable(promise, linked.signal, () => {})
    let held: SessionHeldPermits | undefined
    try {
      const leaseId = await step(call('grant a lease', lease.grant()))
      const ownKey = line + BigInt(leaseId).toString(16)
      const put = await step(
        call(
          'put the permit key',
          client
            .if(ownKey, 'Create', '==', 0)
            .then(client.put(ownKey).value(String(request.count)).lease(leaseId))
            .else(client.get(ownKey))
            .commit(),
        ),
      )
      const revision = put.succeeded ? BigInt(put.header.revision) : ownPut(put, ownKey, leaseId)
      const room = await this.waitForRoom({ request, line, ownKey, revision, deadline, signal: linked.signal, step })
      if (!room) return undefined
      // Revoking the lease deletes the key, which wakes those behind.
      held = new SessionHeldPermits(lifetime, tokensOfHolder(revision, request.count), request.name, () =>
        call('revoke the lease', lease.revoke()),
      )
      return held
    } catch (err) {
      if (request.signal.aborted) throw request.signal.reason
      if (lifetime.lost)
        throw new LockBackendError('etcd', `the lease ended before the permits were taken: ${lifetime.lost.reason}`)
      throw err
    } finally {
      linked.dispose()
      if (!held) this.parts.giveUp(lease, lifetime)
    }
  }

  /**
   * Reads the line ahead of this permit key until the permits before it leave room for
   * `request.count`, sleeping on a watch of the older keys between reads. `false` when the
   * wait ran out.
   */
  private async waitForRoom(at: {
    request: SemaphoreRequest
    line: string
    ownKey: string
    revision: bigint
    deadline: number
    signal: AbortSignal
    step: <T>(promise: Promise<T>) => Promise<T>
  }): Promise<boolean> {
    const { client, call } = this.parts
    const { request, line, ownKey, revision, deadline, signal, step } = at
    const ahead = client
      .getAll()
      .prefix(line)
      .maxCreateRevision((revision - 1n).toString())
    let pollMs = WATCH_POLL_START_MS
    for (;;) {
      const res = await readWhileWaiting(
        () => call('read the permit line', client.if(ownKey, 'Create', '==', revision.toString()).then(ahead).commit()),
        deadline,
        (err) => !signal.aborted && err instanceof LockBackendError,
        step,
      )
      if (!res.succeeded)
        throw new LockBackendError('etcd', 'the own permit key is gone: its lease expired while it waited')
      const kvs = res.responses[0]?.response_range?.kvs ?? []
      const used = kvs.reduce((sum, kv) => sum + (Number(kv.value.toString()) || 0), 0)
      if (used + request.count <= request.permits) return true
      const remaining = deadline - performance.now()
      if (remaining <= 0 || request.waitMs === 0) return false
      const outcome = await this.olderDeleted(
        line,
        revision,
        BigInt(res.header.revision) + 1n,
        Math.min(remaining, pollMs),
        signal,
      )
      if (outcome === 'silent') pollMs = Math.min(pollMs * 2, WATCH_POLL_CAP_MS)
    }
  }

  /** Resolves when a key of `line` older than `revision` is deleted (from `fromRevision` on), after `ms` ('silent'), or on abort. */
  private olderDeleted(
    line: string,
    revision: bigint,
    fromRevision: bigint,
    ms: number,
    signal: AbortSignal,
  ): Promise<'deleted' | 'silent'> {
    if (signal.aborted) return Promise.reject(signal.reason)
    const watcher = this.parts.client
      .watch()
      .prefix(line)
      .startRevision(fromRevision.toString())
      .withPreviousKV()
      .only('delete') // not ignore('put'): in etcd3 1.1.2 ignore is an alias of only, which would drop the deletes
      .watcher()
    // A release behind us does not wake us; no previous value (compacted): re-read to be safe.
    return untilDeleted(watcher, ms, signal, (previous) => !previous || BigInt(previous.create_revision) < revision)
  }
}

/**
 * The permit key already exists: the client resent the put after a connection reset lost
 * its reply, and the first run created it. It is ours when it is under our own lease (the
 * key's name is that lease's id): its creation revision, as the first run would have answered.
 */
function ownPut(put: ITxnResponse, ownKey: string, leaseId: string): bigint {
  const kv = put.responses[0]?.response_range?.kvs[0]
  if (!kv || kv.lease !== leaseId) throw new LockBackendError('etcd', `the permit key ${ownKey} already exists`)
  return BigInt(kv.create_revision)
}
