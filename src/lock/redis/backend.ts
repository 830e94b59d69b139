import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { releaseAbandoned } from '../../redis/abandoned.js'
import { lockKeys, type LockKeys } from './keys.js'
import { clusterKeyOf } from '../../redis/batches.js'
import { Notifier } from '../../redis/notifier.js'
import { PollScheduler } from '../../redis/poll-scheduler.js'
import { RenewalBatch } from '../../redis/renewals.js'
import { execWithReplicaWait } from '../../redis/replicas.js'
import { ServerProbe } from '../../redis/server-probe.js'
import type { AcquireRequest, HeldLock, LockBackend, MultiAcquireRequest, StoreSettings } from '../backend.js'
import { acquireMany, slotRuns } from '../multi/redis.js'
import { acquireWaiting } from '../waiting.js'
import { DEFAULT_MAX_POLL_RATE } from '../../redis/poll-scheduler.js'
import { canFailOver } from '../../redis/failing-clock.js'
import { leasedHold } from './leased-hold.js'
import { boundedRedisCall } from './bounded-call.js'
import { retryThroughFailover } from './failover-retry.js'
import type { RedisLockSettings } from './options.js'
import { defineLockScripts, type LockClient } from './scripts.js'
import { DEFAULT_MAX_SUBSCRIBED_WAITS, POLL_ONLY, SubscribedWaits } from './subscribed-waits.js'
import { RedisSemaphores } from '../semaphore/redis/store.js'
import { FairRedisLocks } from './fair/fair-locks.js'

/** How long a key's token counter outlives its last acquisition (memory bound; fencing does not depend on it). */
const COUNTER_KEEP_MS = 60_000

/**
 * The Redis lock: one key per lock, `owner:token` with PX = lease, a fencing token from a
 * per-key counter issued in the acquire script, compare-and-delete release that publishes
 * on the key's channel, and compare-and-PEXPIRE renewal (extend-many.lua, shared with the
 * cache: the renewals of one tick go out as one call).
 *
 * Names (lockKeys): `<ns>:{l:<key>}` is the token counter, `:lock` the lock, `:ch` the
 * channel; one hash tag, so one slot on a Cluster, and none a cache's key in the same namespace.
 *
 * Waiters subscribe to the channel *before* re-checking, so a release cannot fall in
 * between (Redisson #1763), and sleep until a message, the holder's PTTL, or a backed-off
 * poll, whichever is first. The poll is the backend's one scheduler (poll-scheduler.ts):
 * every wait's remaining lease asked in shared calls, within `maxPollRate`. When the
 * subscriber connection drops, and again when it is back, every wait polls at once.
 * Per-key channels are sharded (SPUBLISH in release-owner.lua, SSUBSCRIBE here) on a Redis ≥ 7 Cluster by default, as the cache's are. At most
 * `maxSubscribedWaits` waits subscribe; the rest wait on the poll alone, on a shorter backoff
 * (subscribed-waits.ts): overload makes waking slower, never a lock refused.
 *
 * With `waitForReplicas`, the acquire script and `WAIT` go in one round trip, and a lock
 * fewer replicas acknowledged is released (waking the waiters) and counts as busy: the
 * attempt is retried within the caller's wait.
 *
 * On a Cluster or Sentinel client an attempt that fails with a failover's error
 * (CLUSTERDOWN, TRYAGAIN, MOVED storms, a connection reset, a timeout) is retried, backed
 * off, within the caller's wait; past it, the typed `RedisUnavailableError`. Renewals and
 * releases are not retried: their errors are the watchdog's and the caller's to see.
 */
export class RedisLockBackend implements LockBackend {
  readonly name = 'redis'
  readonly fifo = 'optional'
  private readonly client: LockClient
  private readonly notifier: Notifier
  private readonly probe: ServerProbe
  private readonly renewals: RenewalBatch
  private readonly polls: PollScheduler
  private readonly subscribed: SubscribedWaits
  /** Cluster or Sentinel: an acquisition retries a failover's errors (see failover-retry.ts). */
  private readonly failsOver: boolean
  /** `locks.semaphore()`: the same client, subscriber and subscription budget. */
  readonly semaphores: RedisSemaphores
  /** `fair: true`: the FIFO line in the lock's keys. */
  private readonly fair: FairRedisLocks

  /** @internal */
  constructor(
    client: Redis | Cluster,
    private readonly settings: StoreSettings,
    private readonly redis: RedisLockSettings = {
      shardedPubSub: 'auto',
      replicaWait: undefined,
      maxPollRate: DEFAULT_MAX_POLL_RATE,
      maxSubscribedWaits: DEFAULT_MAX_SUBSCRIBED_WAITS,
    },
  ) {
    this.client = defineLockScripts(client)
    this.failsOver = canFailOver(client)
    this.probe = new ServerProbe(client, redis.shardedPubSub, settings.commandTimeoutMs)
    this.notifier = new Notifier(client, settings.commandTimeoutMs, this.probe)
    const bounded = (operation: string, command: () => Promise<unknown>) =>
      boundedRedisCall(this.client, settings.commandTimeoutMs, operation, command)
    const keyOf = clusterKeyOf(client)
    this.renewals = new RenewalBatch(
      (locks, args) =>
        bounded('lock extend', () => this.client.stampedeGuardExtendMany(locks.length, ...locks, ...args)),
      keyOf,
    )
    this.subscribed = new SubscribedWaits(redis.maxSubscribedWaits)
    this.polls = new PollScheduler(
      (locks) => bounded('lock poll', () => this.client.stampedeGuardPollLocks(locks.length, ...locks)),
      redis.maxPollRate,
      keyOf,
    )
    // A release published while the subscriber was down is gone: without this, its waiter
    // slept on to its next safety-net poll (up to 5 s; measured 5.0 s after CLIENT KILL TYPE pubsub).
    this.notifier.onLoss(() => this.polls.pollAllNow())
    const parts = { client, notifier: this.notifier, probe: this.probe, subscribed: this.subscribed, settings }
    this.semaphores = new RedisSemaphores(parts)
    this.fair = new FairRedisLocks({ ...parts, renew: (lock, value, ms) => this.renewals.renew(lock, value, ms) })
  }

  async acquire(request: AcquireRequest): Promise<HeldLock | undefined> {
    const keys = lockKeys(this.settings.namespace, request.key)
    if (request.fair) return this.fair.acquire(keys, request)
    // An election candidate's id rides in the value (`<owner>|<id>:<token>`), for observers.
    const newOwner = () => randomBytes(16).toString('hex') + (request.label === undefined ? '' : `|${request.label}`)
    let owner = newOwner()
    const retry = {
      failsOver: this.failsOver,
      deadline: performance.now() + request.waitMs,
      signal: request.signal,
      // The failed attempt may still run, and its release is queued behind it for its owner: take a new one.
      onRetry: () => (owner = newOwner()),
    }
    /** Past `maxSubscribedWaits`: no message will come, the poll is all (a failed subscribe keeps the usual backoff). */
    let pollOnly = false
    return acquireWaiting(
      request,
      async () => {
        let sentAt = performance.now()
        // Through a failover, within the caller's wait: else every acquisition during one fails.
        const reply = await retryThroughFailover(
          () => ((sentAt = performance.now()), this.attempt(keys, owner, request.leaseMs)),
          retry,
        )
        if (!reply) return { busyForMs: 0 } // aborted: acquireWaiting sees it and gives up
        const [won, arg, acknowledged] = reply
        if (won !== 1) return { busyForMs: Number(arg) }
        const wait = this.redis.replicaWait
        if (wait && acknowledged! < wait.replicas) {
          // Strict: a lock a failover could lose is no lock. Give it back (waking whoever saw it
          // busy) and count this attempt as busy; each retry costs at most one WAIT timeout.
          await boundedRedisCall(this.client, this.settings.commandTimeoutMs, 'lock release', () =>
            this.releaseCall(keys, owner, true),
          ).catch(() => {})
          return { busyForMs: wait.timeoutMs }
        }
        return { held: this.held(keys, owner, String(arg), sentAt) }
      },
      async () => {
        const wakeup = await this.subscribed.take(() => this.notifier.subscribe(keys.channel))
        pollOnly = !wakeup
        return wakeup
      },
      (deadline, backoff) => this.polls.enrol(keys.lock, deadline, pollOnly ? POLL_ONLY : backoff),
    )
  }

  /**
   * One try, with `WAIT` in the same round trip when asked (then also the replica count).
   * If it fails without an answer, the script may still run later (replayed after a
   * reconnect): release that owner behind it, on the same connection.
   */
  private async attempt(keys: LockKeys, owner: string, leaseMs: number): Promise<[number, string | number, number?]> {
    const args = [keys.lock, keys.counter, owner, leaseMs, Math.max(COUNTER_KEEP_MS, 2 * leaseMs)] as const
    const wait = this.redis.replicaWait
    try {
      if (!wait)
        return (await boundedRedisCall(this.client, this.settings.commandTimeoutMs, 'lock acquire', () =>
          this.client.stampedeGuardLockAcquire(...args),
        )) as [number, string | number]
      // WAIT waits on the server on purpose: its timeout is added to the bound.
      const { replies, acknowledged } = await boundedRedisCall(
        this.client,
        this.settings.commandTimeoutMs + wait.timeoutMs,
        'lock acquire',
        () =>
          execWithReplicaWait(
            this.client,
            (pipeline) => (pipeline as unknown as LockClient).stampedeGuardLockAcquire(...args),
            wait,
          ),
      )
      const [won, arg] = replies[0] as [number, string | number]
      return [won, arg, acknowledged]
    } catch (error) {
      releaseAbandoned(this.client, keys, owner)
      throw error
    }
  }

  /**
   * Compare-and-delete; `notify`: publish on the channel, sharded or not as the probe says:
   * sent at once when the mode is known (always, but for a Cluster's first seconds), so
   * commands go out in call order.
   */
  private releaseCall(keys: LockKeys, owner: string, notify: boolean): Promise<unknown> {
    const send = (sharded: boolean) =>
      this.client.stampedeGuardLockRelease(
        keys.lock,
        keys.channel,
        `${owner}:`,
        notify ? 1 : 0,
        sharded ? 'SPUBLISH' : 'PUBLISH',
      )
    const sharded = this.probe.shardedPubSub()
    return typeof sharded === 'boolean' ? send(sharded) : sharded.then(send)
  }

  private held(keys: LockKeys, owner: string, token: string, acquiredAt: number): HeldLock {
    const value = `${owner}:${token}`
    return leasedHold(
      token,
      acquiredAt,
      (leaseMs) => this.renewals.renew(keys.lock, value, leaseMs),
      () =>
        boundedRedisCall(this.client, this.settings.commandTimeoutMs, 'lock release', () =>
          this.releaseCall(keys, owner, true),
        ).then(() => {}),
    )
  }

  /** `withLocks`: keys of one slot in one acquire-many.lua call per attempt (src/lock/multi/redis.ts). */
  acquireAll(request: MultiAcquireRequest): Promise<HeldLock[] | { busy: string }> {
    const { namespace, commandTimeoutMs } = this.settings
    return acquireMany(
      {
        client: this.client,
        namespace,
        commandTimeoutMs,
        notifier: this.notifier,
        failsOver: this.failsOver,
        replicaWait: this.redis.replicaWait,
        giveBack: (keys, owner) =>
          boundedRedisCall(this.client, commandTimeoutMs, 'lock release', () => this.releaseCall(keys, owner, true)),
        held: (keys, owner, token, at) => this.held(keys, owner, token, at),
      },
      request,
    )
  }

  atomicRuns(keys: readonly string[]): string[][] {
    return slotRuns(this.client, this.settings.namespace, keys)
  }

  async close(): Promise<void> {
    this.probe.close()
    this.notifier.close()
  }
}
