import type { Client } from 'node-zookeeper-client'
import { randomUUID } from 'node:crypto'
import { LockBackendError } from '../../../errors.js'
import { LeaseWatchdog } from '../../../lease/watchdog.js'
import type { LockBackend } from '../../backend.js'
import { abortable } from '../../backend-calls.js'
import { linkedSignal } from '../../linked-signal.js'
import { firedOrSilent, readWhileWaiting, WATCH_POLL_CAP_MS, WATCH_POLL_START_MS } from '../../queue-wait.js'
import { SessionHeldPermits } from '../session-permits.js'
import { CONNECTION_LOSS, czxid, zkCode, type ZooKeeperCalls } from '../../zookeeper/calls.js'
import { createProtectedNode } from '../../zookeeper/protected-create.js'
import { tokensOfHolder, type HeldPermits, type SemaphoreRequest, type SemaphoreStore } from '../contract.js'

/** @internal What the ZooKeeper lock backend lends its semaphores. */
export interface ZooKeeperSemaphoreParts {
  readonly client: Client
  readonly calls: ZooKeeperCalls
  /** Parent of each semaphore's lease nodes: `<leases>/<encoded name>/`. */
  readonly leasesPath: (name: string) => string
  /** The ZooKeeper lock the acquirers queue on, one key per semaphore name (created on first use). */
  readonly line: () => LockBackend<unknown>
  /** Aborted when the client's session expired. */
  readonly expired: AbortSignal
  readonly closing: AbortSignal
}

/** A lease node's name: the attempt's uuid, the permits it holds, then ZooKeeper's sequence. */
const LEASE_NAME = /^[0-9a-f-]{36}-(\d+)-lease-\d{10}$/

/**
 * Counting semaphores on ZooKeeper, Curator's `InterProcessSemaphoreV2` recipe: acquirers
 * queue on a ZooKeeper lock of their own for the semaphore (FIFO, each waiter watching its
 * predecessor), and only the one at its head acts: it creates its ephemeral sequential
 * lease node `<uuid>-<count>-lease-` under the semaphore's path and, while the counts in
 * the lease nodes' names sum to more than `permits`, waits on a child watch of that path
 * (one watcher per semaphore: the head; the others sleep in the line). Once its permits
 * fit, it leaves the line to the next. So a request for many is never overtaken by small
 * ones, and holders' lease nodes are created in acquisition order: the token per permit is
 * `czxid × 10,000 + i`, strictly increasing. Liveness `'session'`: a session expiry
 * deletes the lease node (the permits come back to the others) and aborts the holder's
 * signal; the watchdog confirms the node every session timeout / 3.
 */
export class ZooKeeperSemaphores implements SemaphoreStore {
  /** @internal */
  constructor(private readonly parts: ZooKeeperSemaphoreParts) {}

  async acquire(request: SemaphoreRequest): Promise<HeldPermits | undefined> {
    const { parts } = this
    if (parts.closing.aborted) throw new LockBackendError('zookeeper', 'the backend is closed')
    if (parts.expired.aborted)
      throw new LockBackendError('zookeeper', "the client's session has expired: create a new client")
    const deadline = performance.now() + request.waitMs
    const inLine = await parts.line().acquire({
      key: request.name,
      leaseMs: request.leaseMs,
      waitMs: request.waitMs,
      signal: request.signal,
    })
    if (!inLine) return undefined
    const linked = linkedSignal([request.signal, parts.closing, parts.expired, inLine.signal])
    const step = <T>(promise: Promise<T>) => abortable(promise, linked.signal, () => {})
    const leases = parts.leasesPath(request.name)
    const prefix = `${randomUUID()}-${request.count}-lease-`
    const startedAt = performance.now()
    const creating = createProtectedNode(parts.calls, leases, prefix, deadline, Buffer.alloc(0))
    creating.catch(() => {})
    let held: SessionHeldPermits | undefined
    try {
      const path = await step(creating)
      const stat = await step(parts.calls.exists(path))
      if (!stat)
        throw new LockBackendError('zookeeper', 'the lease node vanished after its create: the session expired')
      if (!(await this.untilTheyFit(leases, path, request, deadline, linked.signal, step))) return undefined
      held = this.hold(request, path, czxid(stat), startedAt)
      return held
    } catch (err) {
      if (request.signal.aborted) throw request.signal.reason
      if (parts.closing.aborted) throw new LockBackendError('zookeeper', 'the backend was closed while waiting')
      if (parts.expired.aborted) throw new LockBackendError('zookeeper', 'the session expired while waiting')
      throw err
    } finally {
      linked.dispose()
      if (!held) creating.then((path) => parts.calls.removeEventually(path)).catch(() => {})
      void inLine.release().catch(() => {}) // the next in line may look now (not awaited: its node's deletion wakes it)
    }
  }

  /**
   * Waits until the lease nodes' counts sum to at most `permits` (ours included): `false`
   * when the wait ran out first. One child watch armed at a time (ZooKeeper watches cannot
   * be removed, so re-arming on every safety re-read would pile them up).
   */
  private async untilTheyFit(
    leases: string,
    ownPath: string,
    request: SemaphoreRequest,
    deadline: number,
    signal: AbortSignal,
    step: <T>(promise: Promise<T>) => Promise<T>,
  ): Promise<boolean> {
    const own = ownPath.slice(leases.length + 1)
    let pollMs = WATCH_POLL_START_MS
    let armed: Promise<void> | undefined
    for (;;) {
      let fire!: () => void
      const fired = armed ?? new Promise<void>((resolve) => (fire = resolve))
      const names = await readWhileWaiting(
        () =>
          this.parts.calls.call<string[]>('list the semaphore leases', (cb) =>
            armed
              ? this.parts.client.getChildren(leases, cb as never)
              : this.parts.client.getChildren(leases, () => fire(), cb as never),
          ),
        deadline,
        (err) => zkCode((err as { cause?: unknown }).cause) === CONNECTION_LOSS,
        step,
      )
      armed = fired
      if (!names.includes(own))
        throw new LockBackendError('zookeeper', 'the own lease node is gone: the session expired while it waited')
      const used = names.reduce((sum, name) => sum + Number(LEASE_NAME.exec(name)?.[1] ?? 0), 0)
      if (used <= request.permits) return true
      const remaining = deadline - performance.now()
      if (remaining <= 0 || request.waitMs === 0) return false
      if ((await firedOrSilent(armed, Math.min(remaining, pollMs), signal)) === 'fired') armed = undefined
      else pollMs = Math.min(pollMs * 2, WATCH_POLL_CAP_MS)
    }
  }

  private hold(request: SemaphoreRequest, path: string, token: bigint, startedAt: number): SessionHeldPermits {
    const { calls, client, expired } = this.parts
    const lifetime = new LeaseWatchdog({
      key: request.name,
      leaseMs: client.getSessionTimeout(),
      startedAt,
      renew: async () => {
        const stat = await calls.exists(path)
        return stat !== undefined && czxid(stat) === token
      },
    })
    const onExpired = () => lifetime.lose('the ZooKeeper session expired: its lease node is gone')
    expired.addEventListener('abort', onExpired, { once: true })
    const stopListening = () => expired.removeEventListener('abort', onExpired)
    lifetime.signal.addEventListener('abort', stopListening, { once: true })
    // Deleting the lease node fires the head's child watch; then the semaphore's path, if no one holds or waits there.
    const remove = async () => {
      await calls.removeEventually(path)
      calls.remove(path.slice(0, path.lastIndexOf('/'))).catch(() => {})
    }
    return new SessionHeldPermits(lifetime, tokensOfHolder(token, request.count), request.name, remove, stopListening)
  }
}
