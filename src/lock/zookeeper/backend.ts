import type { Client, Stat } from 'node-zookeeper-client'
import type { ZooKeeperClientLike } from './client-like.js'
import { randomUUID } from 'node:crypto'
import { setMaxListeners } from 'node:events'
import { LockBackendError } from '../../errors.js'
import type { AcquireRequest, LockBackend } from '../backend.js'
import type { OneKeyLockBackend } from '../one-key-lock.js'
import type { ReadWriteStore } from '../read-write/store.js'
import { abortable } from '../backend-calls.js'
import { linkedSignal, type LinkedSignal } from '../linked-signal.js'
import { firedOrSilent, readWhileWaiting, WATCH_POLL_CAP_MS, WATCH_POLL_START_MS } from '../queue-wait.js'
import { LeaseWatchdog } from '../../lease/watchdog.js'
import { CONNECTION_LOSS, czxid, zkCode, ZooKeeperCalls } from './calls.js'
import { ZooKeeperSemaphores } from '../semaphore/zookeeper/store.js'
import { createProtectedNode } from './protected-create.js'
import { ZooKeeperHeldLock, type ZooKeeperFencedWrites } from './held-lock.js'

export interface ZooKeeperBackendSettings {
  /** Parent path of every lock: `/<namespace>/<encoded key>/<uuid>-lock-<sequence>`. */
  readonly namespace: string
  /** Bound on each ZooKeeper call, ms. */
  readonly commandTimeoutMs: number
}

const SEQUENCE_DIGITS = 10
/** When a create failed with its outcome unknown, look for our node this long after, ms. */
const SWEEP_AFTER_MS = [1_000, 5_000]

/**
 * The ZooKeeper lock, the recipe from ZooKeeper's own docs (node-zookeeper-client ships
 * none, node-zookeeper-client#8):
 *
 * - Acquire: create an ephemeral sequential node `<uuid>-lock-` under the key's path. The
 *   lowest sequence holds the lock; every other node watches only the one just below its
 *   own, and re-reads the queue when it fires (FIFO, and a release wakes one waiter). The
 *   uuid finds our node again if the reply to the create was lost with the connection
 *   (Curator's "protected" mode), so no orphan node blocks the queue for a session.
 * - Token: the node's `czxid`, the zxid of the transaction that created it. Every write to
 *   an ensemble gets a zxid from the leader, in one total order ((epoch << 32) | counter,
 *   and a new leader's epoch is higher), so a later holder's node always has a greater
 *   czxid, across keys, leader changes, and the parent path being deleted and created
 *   again. The sequence number would not do: it is per parent, restarts when the parent
 *   is recreated, and is a 32-bit counter.
 * - Liveness `'session'`: the node lives as long as the client's session. A session
 *   expiry (the `expired` event) aborts `signal` with `LockLostError`. A disconnection
 *   that recovers before the session timeout is not a loss: the session and its node
 *   survive. While disconnected the client cannot know whether the server has already
 *   expired the session, so the shared watchdog confirms the node every session
 *   timeout / 3 and gives the lock up locally at `last confirmation sent + session
 *   timeout − margin`: the server expires a session no earlier than that.
 * - Every call is bounded by `commandTimeoutMs` and fails with `LockBackendError('zookeeper', …)`.
 */
export function createZooKeeperBackend(
  client: ZooKeeperClientLike,
  settings: ZooKeeperBackendSettings,
): LockBackend<ZooKeeperFencedWrites> {
  return new ZooKeeperBackend(client as unknown as Client, settings)
}

class ZooKeeperBackend implements LockBackend<ZooKeeperFencedWrites> {
  readonly name = 'zookeeper'
  /** Its queue recipe: each waiter watches its predecessor. */
  readonly fifo = 'always'
  private readonly calls: ZooKeeperCalls
  private readonly closing = new AbortController()
  private readonly expired = new AbortController()
  private readonly held = new Set<ZooKeeperHeldLock>()
  private readonly root: string
  private readonly onExpired = () => this.expired.abort()
  /** Counting semaphores (Curator's InterProcessSemaphoreV2), queued on a lock backend of their own. */
  readonly semaphores: ZooKeeperSemaphores
  private semaphoreLine: ZooKeeperBackend | undefined

  constructor(
    private readonly client: Client,
    private readonly settings: ZooKeeperBackendSettings,
  ) {
    this.calls = new ZooKeeperCalls(client, settings.commandTimeoutMs)
    this.root = rootPath(settings.namespace)
    client.on('expired', this.onExpired)
    // One listener per lock held or awaited through this backend: no leak to warn of.
    setMaxListeners(0, this.expired.signal, this.closing.signal)
    const leasesRoot = rootPath(`${settings.namespace}:semaphore`)
    this.semaphores = new ZooKeeperSemaphores({
      client,
      calls: this.calls,
      leasesPath: (name) => `${leasesRoot}/${nodeName(name)}`,
      line: () =>
        (this.semaphoreLine ??= new ZooKeeperBackend(client, {
          ...settings,
          namespace: `${settings.namespace}:semaphore-line`,
        })),
      expired: this.expired.signal,
      closing: this.closing.signal,
    })
  }

  /**
   * `locks.readWrite()`: Curator's InterProcessReadWriteLock recipe, on a backend of its own
   * (root `<namespace>:rw`): nodes `<uuid>-read-lock-<seq>` and `<uuid>-write-lock-<seq>`
   * in one sequence per name. A reader holds once no write node is below its own, a writer
   * once it is the lowest; each watches only the nearest node below that blocks it. A
   * reader after a waiting writer waits for it: arrival order, readers arriving together share.
   */
  readonly readWrite: ReadWriteStore = {
    readers: this.readWriteSide('read'),
    writers: this.readWriteSide('write'),
    close: async () => {},
  }
  private readWriteLine: ZooKeeperBackend | undefined

  private readWriteSide(side: 'read' | 'write'): OneKeyLockBackend<ZooKeeperFencedWrites> {
    return {
      name: 'zookeeper',
      fifo: 'always',
      acquire: (request) => {
        this.readWriteLine ??= new ZooKeeperBackend(this.client, {
          ...this.settings,
          namespace: `${this.settings.namespace}:rw`,
        })
        return this.readWriteLine.acquireQueued(request, side)
      },
      close: async () => {},
    }
  }

  acquire(request: AcquireRequest): Promise<ZooKeeperHeldLock | undefined> {
    return this.acquireQueued(request, 'lock')
  }

  private async acquireQueued(
    request: AcquireRequest,
    side: 'lock' | 'read' | 'write',
  ): Promise<ZooKeeperHeldLock | undefined> {
    if (this.closing.signal.aborted) throw new LockBackendError('zookeeper', 'the backend is closed')
    if (this.expired.signal.aborted)
      throw new LockBackendError('zookeeper', "the client's session has expired: create a new client")
    const deadline = performance.now() + request.waitMs
    const parent = `${this.root}/${nodeName(request.key)}`
    const linked = linkedSignal([request.signal, this.closing.signal, this.expired.signal])
    const waiting = linked.signal
    let turnSignal: LinkedSignal | undefined
    const step = <T>(promise: Promise<T>) => abortable(promise, waiting, () => {})
    const startedAt = performance.now()
    const prefix = `${randomUUID()}-${side === 'lock' ? '' : `${side}-`}lock-`
    const creating = createProtectedNode(this.calls, parent, prefix, deadline, Buffer.from(request.label ?? ''))
    creating.catch(() => {})
    let lifetime: LeaseWatchdog | undefined
    let stopListening = () => {}
    let acquired = false
    try {
      const path = await step(creating)
      // Both sent at once (one connection, answered in order): one round trip for the token and the queue.
      const [stat, queue] = await step(Promise.all([this.ownNode(path), this.calls.children(parent)]))
      const token = czxid(stat)
      lifetime = new LeaseWatchdog({
        key: request.key,
        leaseMs: this.client.getSessionTimeout(),
        startedAt,
        renew: async () => {
          const stat = await this.calls.exists(path)
          return stat !== undefined && czxid(stat) === token
        },
      })
      const lost = lifetime
      const onExpired = () => lost.lose('the ZooKeeper session expired')
      this.expired.signal.addEventListener('abort', onExpired, { once: true })
      stopListening = () => this.expired.signal.removeEventListener('abort', onExpired)
      lost.signal.addEventListener('abort', stopListening, { once: true })
      turnSignal = linkedSignal([waiting, lifetime.signal])
      const ownName = path.slice(parent.length + 1)
      const blocks = side === 'read' ? isWriteNode : () => true
      if (!(await this.waitForTurn(parent, ownName, queue, blocks, deadline, turnSignal.signal, step))) return undefined
      acquired = true
      const held = new ZooKeeperHeldLock(this.calls, lifetime, path, token, this.expired.signal, () => {
        stopListening()
        this.held.delete(held)
      })
      this.held.add(held)
      return held
    } catch (err) {
      if (request.signal.aborted) throw request.signal.reason
      if (this.closing.signal.aborted) throw new LockBackendError('zookeeper', 'the backend was closed while waiting')
      if (this.expired.signal.aborted) throw new LockBackendError('zookeeper', 'the session expired while waiting')
      if (lifetime?.lost)
        throw new LockBackendError(
          'zookeeper',
          `the session could not be confirmed while waiting: ${lifetime.lost.reason}`,
        )
      throw err
    } finally {
      turnSignal?.dispose()
      linked.dispose()
      if (!acquired) {
        stopListening()
        this.giveUp(parent, prefix, creating, lifetime)
      }
    }
  }

  /** The own node's Stat; its absence right after the create means the session is gone. */
  private async ownNode(path: string): Promise<Stat> {
    const stat = await this.calls.exists(path)
    if (!stat)
      throw new LockBackendError('zookeeper', 'the lock node vanished right after it was created: the session expired')
    return stat
  }

  /**
   * Waits until no node below ours under `parent` `blocks` it (starting from `firstRead`,
   * the children read right after the create); `false` when the wait ran out first.
   * Watches the nearest blocking node below ours, one at a time; a bounded, backed-off re-read is the safety net
   * should a watch stay silent. Every re-read also re-checks that our own node still
   * exists: gone means the session expired while we waited.
   */
  private async waitForTurn(
    parent: string,
    ownName: string,
    firstRead: string[],
    blocks: (name: string) => boolean,
    deadline: number,
    signal: AbortSignal,
    step: <T>(promise: Promise<T>) => Promise<T>,
  ): Promise<boolean> {
    let pollMs = WATCH_POLL_START_MS
    // The watch set on the predecessor, kept across safety-net re-reads: ZooKeeper watches
    // are one-shot and cannot be removed, so setting another on the same node would pile up.
    let watching: { path: string; fired: Promise<void> } | undefined
    const ownPrefix = ownName.slice(0, -SEQUENCE_DIGITS)
    for (let children: string[] | undefined = firstRead; ; children = undefined) {
      const names =
        children ?? (await readWhileWaiting(() => this.calls.children(parent), deadline, lostConnection, step))
      // A duplicate of ours from a create retried after a lost reply: it must not queue.
      for (const name of names)
        if (name !== ownName && name.startsWith(ownPrefix))
          void this.calls.removeEventually(`${parent}/${name}`).catch(() => {})
      const queue = names
        .filter((name) => isLockNode(name) && (name === ownName || !name.startsWith(ownPrefix)))
        .sort(bySequence)
      const index = queue.indexOf(ownName)
      if (index < 0)
        throw new LockBackendError(
          'zookeeper',
          'the own lock node is gone after the wait: the session expired meanwhile',
        )
      const blocker = queue.slice(0, index).filter(blocks).pop()
      if (blocker === undefined) return true
      const remaining = deadline - performance.now()
      if (remaining <= 0) return false
      const predecessor = `${parent}/${blocker}`
      if (watching?.path !== predecessor) {
        let fire!: () => void
        const fired = new Promise<void>((resolve) => (fire = resolve))
        const stat = await readWhileWaiting(
          () => this.calls.exists(predecessor, () => fire()),
          deadline,
          lostConnection,
          step,
        )
        if (!stat) continue // already gone: read the queue again
        watching = { path: predecessor, fired }
      }
      if ((await firedOrSilent(watching.fired, Math.min(remaining, pollMs), signal)) === 'silent') {
        pollMs = Math.min(pollMs * 2, WATCH_POLL_CAP_MS)
      } else {
        watching = undefined
      }
    }
  }

  /**
   * Our node must not outlive a failed or abandoned attempt: it would block the queue for
   * the whole session. So remove it once the create resolves, even late; when the create
   * failed with its outcome unknown (connection lost), sweep the queue for our uuid a
   * little later, when the client has reconnected. Then the key's path, if it is empty.
   */
  private giveUp(parent: string, prefix: string, creating: Promise<string>, lifetime: LeaseWatchdog | undefined): void {
    void lifetime?.stop()
    creating.then(
      (path) =>
        this.calls
          .removeEventually(path)
          .then(() => this.calls.remove(parent))
          .catch(() => {}),
      () => {
        for (const delayMs of SWEEP_AFTER_MS) {
          const timer = setTimeout(() => {
            this.calls
              .children(parent)
              .then((names) =>
                Promise.all(
                  names
                    .filter((name) => name.startsWith(prefix))
                    .map((name) => this.calls.removeEventually(`${parent}/${name}`)),
                ),
              )
              .catch(() => {})
          }, delayMs)
          timer.unref()
        }
      },
    )
  }

  async close(): Promise<void> {
    this.closing.abort()
    this.client.removeListener('expired', this.onExpired)
    await Promise.allSettled([...this.held].map((held) => held.release()))
    await this.semaphoreLine?.close()
    await this.readWriteLine?.close()
  }
}

/** The path every lock of `namespace` lives under. */
export function rootPath(namespace: string): string {
  return '/' + namespace.split('/').filter(Boolean).map(nodeName).join('/')
}

/** A key as one node name: no `/`, and never `.` or `..` (ZooKeeper rejects both). */
export function nodeName(key: string): string {
  return encodeURIComponent(key).replace(/\./g, '%2E')
}

/** A read that failed this way is tried again: the client reconnects, the session and our node live on. */
function lostConnection(err: unknown): boolean {
  return zkCode((err as { cause?: unknown }).cause) === CONNECTION_LOSS
}

function isWriteNode(name: string): boolean {
  return /-write-lock-\d{10}$/.test(name)
}

export function isLockNode(name: string): boolean {
  return /-lock-\d{10}$/.test(name)
}

export function bySequence(a: string, b: string): number {
  return Number(a.slice(-SEQUENCE_DIGITS)) - Number(b.slice(-SEQUENCE_DIGITS))
}
