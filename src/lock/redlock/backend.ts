import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import { LockBackendError } from '../../errors.js'
import { lockKeys, type LockKeys } from '../redis/keys.js'
import { Notifier } from '../../redis/notifier.js'
import { RenewalBatch } from '../../redis/renewals.js'
import { ServerProbe } from '../../redis/server-probe.js'
import type { AcquireRequest, HeldLock, LockBackend } from '../backend.js'
import { boundedRedisCall } from '../redis/bounded-call.js'
import { defineLockScripts, type LockClient } from '../redis/scripts.js'
import { acquireWaiting, type Wakeup } from '../waiting.js'
import { leaseMarginMs } from '../../lease/watchdog.js'

/** What each node answered: `true` yes, `false` no (held by another owner / not ours), `undefined` no answer in time. */
type Votes = (boolean | undefined)[]

/**
 * Redlock over N independent Redis masters (not replicas of each other): the lock is
 * held while a majority (N/2 + 1) of them hold `owner:` for the key, and only for
 * `lease − elapsed − drift` after the attempt was sent (drift = 1 % of the lease + 2 ms).
 * Each node call has its own short bound (`nodeTimeoutMs`), so a dead node costs that
 * much, not the whole wait.
 *
 * No fencing token: independent masters cannot agree on a monotonic counter (two
 * majorities overlap in one node, whose counter may have restarted), so `token` is
 * `undefined` and the front throws `FencingUnsupportedError` if it is read. Safety rests
 * on timing: a holder paused past its validity (GC, SIGSTOP) overlaps the next one.
 * Waiters subscribe on the first node that answers (every node's release publishes), with
 * the backed-off poll (50 ms → 1 s) as the safety net.
 */
export class RedlockBackend implements LockBackend {
  readonly name = 'redlock'
  private readonly nodes: LockClient[]
  private readonly notifiers: Notifier[]
  /** Per node, the renewals of one tick as one extend-many.lua call. */
  private readonly renewals = new Map<LockClient, RenewalBatch>()
  readonly quorum: number

  /** Nodes that have been connected at least once: only those are held to `nodeTimeoutMs`. */
  private readonly connected = new Set<LockClient>()

  /** @internal `firstConnectMs`: the bound for a node that has not connected yet (a process starting up should not count it dead after 100 ms). */
  constructor(
    nodes: readonly Redis[],
    private readonly namespace: string,
    private readonly nodeTimeoutMs: number,
    private readonly firstConnectMs: number,
  ) {
    this.nodes = nodes.map((node) => defineLockScripts(node))
    for (const node of this.nodes) {
      this.renewals.set(
        node,
        new RenewalBatch((locks, args) => node.stampedeGuardExtendMany(locks.length, ...locks, ...args)),
      )
      if (node.status === 'ready') this.connected.add(node)
      else (node as unknown as NodeJS.EventEmitter).once('ready', () => this.connected.add(node))
    }
    this.notifiers = nodes.map((node) => new Notifier(node, nodeTimeoutMs, new ServerProbe(node, false, nodeTimeoutMs)))
    this.quorum = Math.floor(nodes.length / 2) + 1
  }

  async acquire(request: AcquireRequest): Promise<HeldLock | undefined> {
    const { key, leaseMs } = request
    const keys = lockKeys(this.namespace, key)
    return acquireWaiting(
      request,
      async () => {
        const owner = `${randomBytes(16).toString('hex')}:`
        const sentAt = performance.now()
        const votes = await this.ask('redlock acquire', (node) =>
          node.set(keys.lock, owner, 'PX', leaseMs, 'NX').then((reply) => reply === 'OK'),
        )
        const validUntil = sentAt + leaseMs - leaseMarginMs(leaseMs)
        if (count(votes, true) >= this.quorum && performance.now() < validUntil)
          return { held: this.held(keys, owner, sentAt, validUntil) }
        // Not ours: undo wherever it was taken, and where the answer is unknown (it may land later).
        await this.releaseAll(keys, owner)
        this.throwIfNoQuorumPossible(votes, 'acquire')
        // Some nodes said yes: a release is landing node by node (we heard the first one),
        // or contenders split the vote. Either way no further message may come: retry
        // soon, jittered so split voters do not collide again.
        return { busyForMs: count(votes, true) > 0 ? 5 + Math.random() * 45 : Infinity }
      },
      () => this.subscribe(keys.channel),
    )
  }

  /** Releases publish on every node; hearing one is enough (the poll covers the rest), so listen on the first node that answers. */
  private async subscribe(channel: string): Promise<Wakeup> {
    for (const notifier of this.notifiers) {
      try {
        return await notifier.subscribe(channel)
      } catch {
        // that node is down: try the next
      }
    }
    throw new LockBackendError(this.name, 'no node accepted a subscription')
  }

  private held(keys: LockKeys, owner: string, acquiredAt: number, firstValidUntil: number): HeldLock {
    let validUntil = firstValidUntil
    let released: Promise<void> | undefined
    return {
      token: undefined,
      liveness: 'lease',
      acquiredAt,
      signal: new AbortController().signal, // loss is the watchdog's to detect
      resource: undefined,
      renew: async (leaseMs) => {
        // An expired Redlock is not extended: another owner may hold a majority by now.
        if (performance.now() >= validUntil) return false
        const sentAt = performance.now()
        const votes = await this.ask('redlock extend', (node) =>
          this.renewals.get(node)!.renew(keys.lock, owner, leaseMs),
        )
        const until = sentAt + leaseMs - leaseMarginMs(leaseMs)
        if (count(votes, true) >= this.quorum && performance.now() < until) {
          validUntil = until
          return true
        }
        this.throwIfNoQuorumPossible(votes, 'extend') // unknown: the watchdog retries until its deadline
        return false
      },
      release: () => (released ??= this.releaseAll(keys, owner, true)),
    }
  }

  /** Every node at once, each bounded by its own timeout. */
  private async ask(operation: string, command: (node: LockClient) => Promise<boolean>): Promise<Votes> {
    const answers = await Promise.allSettled(
      this.nodes.map((node) =>
        boundedRedisCall(
          node,
          this.connected.has(node) ? this.nodeTimeoutMs : Math.max(this.nodeTimeoutMs, this.firstConnectMs),
          operation,
          () => command(node),
        ),
      ),
    )
    return answers.map((answer) => (answer.status === 'fulfilled' ? answer.value : undefined))
  }

  /** Fewer nodes answered than a quorum needs: that is a store failure, not a busy lock. */
  private throwIfNoQuorumPossible(votes: Votes, operation: string): void {
    const answered = votes.length - count(votes, undefined)
    if (answered < this.quorum) {
      throw new LockBackendError(
        this.name,
        `${operation}: only ${answered} of ${votes.length} nodes answered within ${this.nodeTimeoutMs} ms; a quorum needs ${this.quorum}`,
      )
    }
  }

  /** `holder`: a holder's release (publishes to waiters, and must reach a node); else the undo of a failed attempt. */
  private async releaseAll(keys: LockKeys, owner: string, holder = false): Promise<void> {
    const votes = await this.ask('redlock release', (node) =>
      node.stampedeGuardLockRelease(keys.lock, keys.channel, owner, holder ? 1 : 0).then((reply) => reply === 1),
    )
    if (holder && count(votes, undefined) === votes.length) {
      throw new LockBackendError(
        this.name,
        `release: no node answered within ${this.nodeTimeoutMs} ms; the lock ends with its lease`,
      )
    }
  }

  async close(): Promise<void> {
    for (const notifier of this.notifiers) notifier.close()
  }
}

function count(votes: Votes, value: boolean | undefined): number {
  return votes.filter((vote) => vote === value).length
}
