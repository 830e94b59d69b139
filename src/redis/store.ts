import type { Cluster, Redis } from 'ioredis'
import type { Lifetimes } from '../entry.js'
import type { CacheEmitter } from '../events.js'
import { RedisUnavailableError } from '../errors.js'
import { releaseAbandoned } from './abandoned.js'
import type { CircuitBreaker } from './breaker.js'
import { delay } from '../timers.js'
import { FailingClock } from './failing-clock.js'
import { CommandBudget } from './command-budget.js'
import type { EntryKeys } from './keys.js'
import { FreshReadBatch, getOne, promisedRead, type FreshRead, type FreshReader } from './fresh-reads.js'
import { Dispatch, InFlightList } from './in-flight.js'
import { RenewalBatch } from './renewals.js'
import { clusterKeyOf } from './batches.js'
import { execWithReplicaWait, type ReplicaWait } from './replicas.js'
import { defineScripts, type ScriptedClient } from './scripts.js'
import { ServerClock } from './server-clock.js'
import type { ServerProbe } from './server-probe.js'

export type LookupMode = 'read' | 'refresh' | 'token'

/** Commands of a process that holds a lock: they skip ahead of queued lookups. */
const LOCK_HOLDER_OPERATIONS = new Set(['extend', 'commit', 'release'])

/** ioredis prefixes KEYS (so our channels inside scripts) but neither PUBLISH nor SUBSCRIBE arguments. */
export function keyPrefixOf(client: Redis | Cluster): string {
  return (client.options as { keyPrefix?: string }).keyPrefix ?? ''
}

/** Cluster, or a client that finds its primary through Sentinel. */
export function canFailOver(client: Redis | Cluster): boolean {
  return client.isCluster === true || ((client.options as { sentinels?: unknown[] }).sentinels?.length ?? 0) > 0
}

/** What getOrLock found. `data` is '' when there is no usable value. */
export interface Lookup {
  state: 'fresh' | 'grace' | 'fallback' | 'miss'
  lock: 'none' | 'won' | 'held' | 'backoff' | 'pass' | 'token' | 'error'
  /** Token when won/token; ms left when held/backoff/pass/error. */
  lockArg: string
  /** Bytes, as stored (see encodeValue): a BinaryValue's payload must not go through UTF-8. */
  data: Buffer
  life: Lifetimes
  corrupt: boolean
  /** Fencing token the value was written with ('' for none): a larger one is a newer value. */
  version: string
  /**
   * The entry's fence `f`, in every state: the last value's version, or what a delete raised
   * above every token before it. '' when Redis holds none (never written, or lost): a fallback
   * older than it was deleted, not lost (see CacheState.unlessDeleted).
   */
  fence: string
  /** With a replica wait: how many replicas acknowledged the lookup's writes (the lock). */
  acknowledged?: number
  /** The server time (ms) the lookup ran at: a load it elects begins no earlier (tags compare it). */
  serverNow: number
  /**
   * `performance.now()` when it was sent, after any wait for a `redisCommands` slot: a lock it
   * took has its lease counted from no earlier. (From before that wait, 20,000 lookups queued
   * at once outlasted the lease: 9,056 leaders were told at once that they had lost their lock.)
   */
  sentAt: number
}

/** An invalidation to publish with a write: on `channel`, `message`. */
export interface Broadcast {
  channel: string
  message: string
}

/** What the leader writes: the encoded value and its lifetimes from now, in ms. */
export interface CommitRequest {
  lockValue: string
  token: string
  data: string | Buffer
  freshMs: number
  graceMs: number
  fallbackMs: number
  loadMs: number
}

/**
 * The L2 tier: one method per script, each bounded by `timeoutMs` and guarded by
 * the circuit breaker. Every failure surfaces as `RedisUnavailableError`, which
 * the state machine answers by carrying on without Redis.
 */
export class RedisStore {
  private readonly client: ScriptedClient
  private readonly keyPrefix: string
  /** A Cluster or Sentinel client: a failing command may be a failover in progress, worth retrying. */
  private readonly failsOver: boolean
  /**
   * Set by throughFailover while it starts a retry. The breaker counts consecutive failed
   * operations, and the retries of one operation waiting out one failover are not more of
   * them (or a single shard's failover would open the breaker for every key of the cluster).
   */
  private retrying = false
  /** How long Redis (on a Cluster: the key's master) has been failing. */
  private readonly failing: FailingClock
  private connectedOnce: boolean
  /** Commands sent and not answered, on one timer for their timeouts: the plain ones, and those that also WAIT. */
  private readonly inFlight: InFlightList<Dispatch<unknown>>
  private inFlightWaiting: InFlightList<Dispatch<unknown>> | undefined
  private readonly budget: CommandBudget
  /** The server clock, from the times scripts return: turns a fresh copy's deadlines into local ones. */
  readonly clock = new ServerClock()
  /** Fresh-copy reads of this tick, sent as one MGET (see getFresh, fresh-reads.ts). */
  private readonly reads: FreshReadBatch
  /** Lease renewals of one tick, sent as one extend-many.lua call (see renewals.ts). */
  private readonly renewals: RenewalBatch
  /** See `clusterKeyOf` (batches.ts). */
  readonly clusterKeyOf: ((key: string) => string) | undefined
  private readonly cluster: boolean
  private clockSync: Promise<void> | undefined
  private readonly connection: NodeJS.EventEmitter
  private readonly onReady = () => (this.connectedOnce = true)
  /** Commands already sent when the connection drops would be retried after a reconnect: fail them now, and the queued ones. */
  private readonly onClose = () => {
    const lost = new RedisUnavailableError('redis connection lost')
    const fail = (command: Dispatch<unknown>) => command.failed(this.failure(command, lost))
    this.inFlight.failAll(fail)
    this.inFlightWaiting?.failAll(fail)
    this.budget.failQueued(lost)
  }

  constructor(
    client: Redis | Cluster,
    private readonly timeoutMs: number,
    private readonly breaker: CircuitBreaker,
    private readonly events: CacheEmitter,
    private readonly probe: ServerProbe,
    /** See `redisFailoverWait`; only used on a client that can fail over. */
    private readonly failoverWaitMs = 0,
    /** See `lock.waitForReplicas`: WAIT after each lookup, in the same round trip. */
    private readonly replicaWait?: ReplicaWait,
    commands: { maxInFlight: number; maxQueued: number } = { maxInFlight: 256, maxQueued: 50_000 },
  ) {
    this.budget = new CommandBudget(commands.maxInFlight, commands.maxQueued)
    this.client = defineScripts(client)
    this.inFlight = this.inFlightList(timeoutMs)
    this.reads = new FreshReadBatch(this.client, this.budget, breaker, events, (dispatch) => this.dispatch(dispatch))
    this.cluster = client.isCluster === true
    this.keyPrefix = keyPrefixOf(client)
    this.clusterKeyOf = clusterKeyOf(client)
    // A batch's keys share one slot on a Cluster: the first stands for them in the failing clock.
    this.renewals = new RenewalBatch((locks, args) => this.call('extend', locks[0], () => this.client.stampedeGuardExtendMany(locks.length, ...locks, ...args)), this.clusterKeyOf)
    this.failsOver = canFailOver(client)
    this.failing = new FailingClock(client.isCluster === true ? (client as Cluster) : undefined, this.keyPrefix)
    this.connectedOnce = client.status === 'ready'
    this.connection = client as unknown as NodeJS.EventEmitter
    if (!this.connectedOnce) this.connection.once('ready', this.onReady)
    this.connection.on('close', this.onClose)
  }

  /** Removes our listeners from the client, which outlives the cache. */
  close(): void {
    this.connection.off('ready', this.onReady)
    this.connection.off('close', this.onClose)
  }

  /**
   * The fresh hit: one GET of the fresh copy, which exists exactly while the value is
   * fresh by the server clock. A key of a foreign type is reported, not an outage.
   *
   * Each read takes one slot of the command budget, as a script call does, and reads that
   * got their slot in the same tick go out together as one MGET: the budget bounds the keys
   * in flight, not the round trips, so batching cannot put 16 times more work in flight
   * behind one `redisTimeout`, and a read past `maxQueued` is refused like any command.
   */
  getFresh(freshKey: string): Promise<FreshRead> {
    return promisedRead(freshKey, (reader) => this.readFresh(reader))
  }

  /** getFresh, telling `reader` instead of settling a promise (the fresh hit's path). */
  readFresh(reader: FreshReader): void {
    // On a Cluster the keys of one tick are in many slots, and MGET needs one.
    // A retry through a failover goes alone, by call(), which keeps it out of the breaker's count.
    if (this.cluster || this.retrying) {
      this.call('get', reader.freshKey, () => getOne(this.client, reader.freshKey)).then((read) => reader.found(read), (error: unknown) => reader.failed(error))
      return
    }
    this.reads.read(reader)
  }

  /**
   * `operation`, retried every `retryMs` on a client that can fail over (Cluster, Sentinel)
   * until `deadline` (performance.now() ms), for as long as Redis has been failing for less
   * than `failoverWaitMs`. During a failover every process would otherwise run the loader
   * in-process, each one an extra load, or a leader's commit would be lost and its waiters
   * would wait out its lock; retrying until the promoted node serves keeps it to one load.
   * A Redis down for longer is an outage: callers then carry on without it at once.
   * - `key`: any key of the entry. On a Cluster, how long Redis has been failing is judged
   *   for the master of its slot (see FailingClock).
   * - `patient`: the caller waits for another process's load, as it would until `deadline`
   *   anyway, so the failover does not end that wait sooner (else each waiter loads on its own).
   */
  async throughFailover<T>(operation: () => Promise<T>, deadline: number, retryMs: number, { key, patient = false }: { key?: string; patient?: boolean } = {}): Promise<T> {
    let firstFailure: number | undefined // of this operation: bounds one that fails outside call() (a subscription)
    for (let attempt = 0; ; attempt++) {
      try {
        let result: Promise<T>
        this.retrying = attempt > 0
        try {
          result = operation() // call() reads `retrying` synchronously, before its first await
        } finally {
          this.retrying = false
        }
        return await result
      } catch (error) {
        const now = performance.now()
        firstFailure ??= now
        const failingFor = now - Math.min(this.failing.failingSince(key) ?? now, firstFailure)
        if (!this.failsOver || (!patient && failingFor >= this.failoverWaitMs) || now + retryMs >= deadline) throw error
        await delay(retryMs).promise
      }
    }
  }

  /**
   * Set-up a fresh process would otherwise pay on its first calls: connect and measure the
   * server clock (so the first calls can take the GET path). Scripts need nothing: ioredis
   * sends a script's first call on a connection as EVAL, so no NOSCRIPT round trip occurs.
   */
  warmUp(): Promise<void> {
    return this.syncClock()
  }

  /**
   * Measures the server clock (TIME) when the estimate is missing or old. One at a time;
   * it bypasses the breaker (a slow first connection, or a busy moment, is no outage, and
   * must not open it for the calls that matter), never rejects, and is bounded by the
   * command timeout.
   */
  syncClock(): Promise<void> {
    if (!this.clock.stale()) return Promise.resolve()
    if (this.clockSync) return this.clockSync
    if (this.connectedOnce && this.client.status !== 'ready') return Promise.resolve()
    const sentAt = performance.now()
    const measured = this.client.time().then(([seconds, micros]) => {
      this.clock.observe(Number(seconds) * 1000 + Math.floor(Number(micros) / 1000), sentAt, performance.now())
    }, () => {
      // Redis is unavailable: lookups take the script path, which measures the clock too.
    })
    let timer: NodeJS.Timeout | undefined
    const bounded = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.timeoutMs)
      timer.unref()
    })
    this.clockSync = Promise.race([measured, bounded]).finally(() => {
      clearTimeout(timer)
      this.clockSync = undefined
    })
    return this.clockSync
  }

  /**
   * `refreshBelowMs`: in 'refresh' mode, only refresh a value fresh for at most this long (-1: always).
   * `onAbandoned`: for a caller that retries with the same `owner` (so that a lock its lost
   * reply took is its own): told instead of queueing the release of an unanswered lookup,
   * which would also take the lock a later retry won; it calls `releaseAbandoned` once done.
   */
  async getOrLock(keys: EntryKeys, owner: string, leaseMs: number, mode: LookupMode, retentionMs: number, refreshBelowMs = -1, onAbandoned?: () => void): Promise<Lookup> {
    // The Buffer variant: the value's bytes must not go through UTF-8 (a BinaryValue's payload).
    const args = [keys.entry, keys.lock, keys.fresh, owner, leaseMs, mode, retentionMs, Math.round(refreshBelowMs)] as const
    let acknowledged: number | undefined
    let sent = false
    let sentAt = performance.now()
    const reply = (await this.call('getOrLock', keys.entry, async () => {
      sent = true
      sentAt = performance.now() // not while it waited for a slot: the lease and the clock count from here
      if (!this.replicaWait) return this.client.stampedeGuardGetOrLockBuffer(...args)
      const { replies, acknowledged: count } = await execWithReplicaWait(this.client, (pipeline) => (pipeline as unknown as ScriptedClient).stampedeGuardGetOrLockBuffer(...args), this.replicaWait)
      acknowledged = count
      return replies[0]
    }, this.replicaWait?.timeoutMs).catch((error: unknown) => {
      // Sent and not answered: it may still take the lock later, for nobody. Undo that behind it.
      if (sent) onAbandoned ? onAbandoned() : this.releaseAbandoned(keys, owner)
      throw error
    })) as [Buffer, Buffer, Buffer, Buffer, number, number, number, number, number, number, Buffer, Buffer, Buffer]
    const serverNow = Number(String(reply[10]))
    this.clock.observe(serverNow, sentAt, performance.now())
    const [state, lock, lockArg, data, freshMs, graceMs, fallbackMs, loadMs, corrupt, ttlMs, , version, fence] = reply
    return {
      state: String(state) as Lookup['state'],
      lock: String(lock) as Lookup['lock'],
      lockArg: String(lockArg),
      data,
      life: { freshMs, graceMs, fallbackMs, loadMs, ttlMs: ttlMs || freshMs },
      corrupt: corrupt === 1,
      version: String(version),
      fence: String(fence),
      acknowledged,
      serverNow,
      sentAt,
    }
  }

  /** Undoes, behind them, what lookups of `owner` that got no answer may still do (see abandoned.ts). */
  releaseAbandoned(keys: EntryKeys, owner: string): void {
    releaseAbandoned(this.client, keys, owner)
  }

  /**
   * Returns the version (fencing token) it was written with, or undefined when fenced out by
   * a newer one. With `broadcast` (set()), the invalidation is published in the same script.
   *
   * `undoLate` (set(), whose token is taken when the script runs, so no fence stops it): when
   * the commit is sent and gets no answer, its caller is told it failed, yet Redis may still run
   * it later, from its backlog or resent by ioredis after a reconnect, over a newer value written
   * meanwhile. An invalidation (retention `undoLate` ms) is queued right behind it on the same
   * connection, as an abandoned lookup's release is (abandoned.ts): whenever the late write
   * runs, the key is deleted after it, and the next call loads the current value.
   */
  async commit(keys: EntryKeys, request: CommitRequest, broadcast?: Broadcast, undoLate?: number): Promise<string | undefined> {
    const { lockValue, token, data, freshMs, graceMs, fallbackMs, loadMs } = request // freshMs is the ttl
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    const sentAt = performance.now()
    let sent = false
    const [written, , now, version, corrupt] = (await this.call('commit', keys.entry, () => {
      sent = true
      return this.client.stampedeGuardCommit(keys.entry, keys.lock, keys.channel, keys.fresh, lockValue, token, data, freshMs, graceMs, fallbackMs, Math.round(loadMs), publish, ...this.broadcastArgs(broadcast))
    }).catch((error: unknown) => {
      if (sent && undoLate !== undefined) this.client.stampedeGuardInvalidate(keys.entry, keys.fresh, undoLate, ...this.broadcastArgs(broadcast)).catch(() => {})
      throw error
    })) as [number, number, string, string, number]
    this.clock.observe(Number(now), sentAt, performance.now())
    this.reportCorrupt(keys, corrupt)
    return written === 1 ? version : undefined
  }

  async release(keys: EntryKeys, lockValue: string, message: string, marks: { backoffMs?: number; passMs?: number; negativeMs?: number } = {}): Promise<boolean> {
    const { backoffMs = 0, passMs = 0, negativeMs = 0 } = marks
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    const [released, corrupt] = (await this.call('release', keys.entry, () =>
      this.client.stampedeGuardRelease(keys.entry, keys.lock, keys.channel, lockValue, message, backoffMs, passMs, publish, negativeMs),
    )) as [number, number]
    this.reportCorrupt(keys, corrupt)
    return released === 1
  }

  /** Renews the lease if the lock is still ours, batched with this tick's other renewals. */
  extend(keys: EntryKeys, lockValue: string, leaseMs: number): Promise<boolean> {
    return this.renewals.renew(keys.lock, lockValue, leaseMs)
  }

  /** The safety-net poll of one batch of waits (see poll-scheduler.ts): each lock's PTTL. */
  pollLocks(locks: string[]): Promise<unknown> {
    return this.call('poll', locks[0], () => this.client.stampedeGuardPollLocks(locks.length, ...locks))
  }

  /** Deletes the value, keeps the fence, and publishes `broadcast` in the same script. */
  async invalidate(keys: EntryKeys, retentionMs: number, broadcast?: Broadcast): Promise<void> {
    const corrupt = await this.call('invalidate', keys.entry, () => this.client.stampedeGuardInvalidate(keys.entry, keys.fresh, retentionMs, ...this.broadcastArgs(broadcast)))
    this.reportCorrupt(keys, corrupt)
  }

  /** A script found planted or corrupted data at the entry's keys, and repaired it (see fields.lua). */
  private reportCorrupt(keys: EntryKeys, corrupt: unknown): void {
    if (corrupt === 1) this.events.emit('corrupt', { key: keys.key })
  }

  /** A command of another module (the tag scripts), bounded and guarded as the store's own are. */
  run<T>(operation: string, command: () => Promise<T>): Promise<T> {
    return this.call(operation, undefined, command)
  }

  /**
   * `send` for each item, at most `redisCommands.maxInFlight` at a time: a fan-out (a tag's
   * members, an entry's tags) wider than the budget would overflow `maxQueued` on its own
   * and fail every time. With the default budget (256) it is one round.
   */
  async fanOut<T, R>(items: readonly T[], send: (item: T) => Promise<R>): Promise<R[]> {
    const width = this.budget.maxInFlight
    if (items.length <= width) return Promise.all(items.map(send))
    const results: R[] = []
    for (let i = 0; i < items.length; i += width) results.push(...await Promise.all(items.slice(i, i + width).map(send)))
    return results
  }

  /** A channel is no key, so ioredis does not apply `keyPrefix` to it: add it, as the subscriber does. */
  private broadcastArgs(broadcast: Broadcast | undefined): [string, string] {
    return broadcast ? [this.keyPrefix + broadcast.channel, broadcast.message] : ['', '']
  }

  /**
   * The per-key notification command: at once when the probe knows the server (so commands
   * go out in call order, with no await in between), else once it does (bounded).
   */
  private publishCommand(): 'PUBLISH' | 'SPUBLISH' | Promise<'PUBLISH' | 'SPUBLISH'> {
    const sharded = this.probe.shardedPubSub()
    const command = (known: boolean) => (known ? 'SPUBLISH' : 'PUBLISH')
    return typeof sharded === 'boolean' ? command(sharded) : sharded.then(command)
  }

  /**
   * Commands, bounded by the budget of commands in flight; lock holders' commands queue first.
   * `key`: one the command touches, for the failing clock (undefined: the tag scripts).
   * `extraMs`: added to the timeout for a command that waits on the server on purpose (WAIT).
   */
  private async call<T>(operation: string, key: string | undefined, command: () => Promise<T>, extraMs = 0): Promise<T> {
    // A retry through a failover goes to Redis even past an open breaker: it has already been
    // judged worth it (within redisFailoverWait), and an open breaker would only skip it to no end.
    // Read before the first await (throughFailover sets it only while it calls us).
    const retry = this.retrying
    // Commands reach Redis in the order they were asked for: reads of this tick go first.
    if (this.reads.pending && operation !== 'get' && operation !== 'mget') this.reads.sendReads()
    if (!retry && !this.breaker.allow()) throw new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`)
    const waiting = this.budget.acquire(LOCK_HOLDER_OPERATIONS.has(operation), operation === 'extend')
    if (waiting) {
      try {
        await waiting
      } catch (error) {
        // Refused (queue full) or flushed (breaker opened, connection lost): no failure of its own.
        this.events.emit('redis-error', { operation, error })
        throw error
      }
    }
    try {
      return await this.send(operation, command, extraMs, retry, key)
    } finally {
      this.budget.release()
    }
  }

  /**
   * One command with its own timeout, started now that it is sent; `retry`: a retry through a
   * failover, not counted by the breaker; `key`: one it touches (batched reads: none, standalone).
   */
  private send<T>(operation: string, command: () => Promise<T>, extraMs = 0, retry = false, key?: string): Promise<T> {
    return new Promise<T>((resolve, reject) => this.dispatch(new Settles(operation, retry, command, resolve, reject, key), extraMs))
  }

  /**
   * Sends `command` now, and settles `dispatch` once: with the reply, or after `redisTimeout`
   * (plus `extraMs`), or when the connection drops, whichever is first. No promise of its
   * own and no timer per command (see in-flight.ts): this is on every fresh hit's path.
   */
  private dispatch<T>(dispatch: Dispatch<T>, extraMs = 0): void {
    // A client that was connected and lost its connection would queue the command until it
    // reconnects: fail at once instead of after redisTimeout. Before the first connection,
    // commands may wait for it (a starting process should not skip Redis).
    if (this.connectedOnce && this.client.status !== 'ready') {
      dispatch.settled = true
      dispatch.failed(this.failure(dispatch, new RedisUnavailableError(`redis ${dispatch.operation} skipped: connection is ${this.client.status}`)))
      return
    }
    const list = (extraMs === 0 ? this.inFlight : (this.inFlightWaiting ??= this.inFlightList(this.timeoutMs + extraMs))) as InFlightList<Dispatch<T>>
    list.add(dispatch)
    dispatch.send().then((value) => {
      if (!list.settle(dispatch)) return
      this.breaker.success()
      this.failing.succeeded(dispatch.key)
      dispatch.answered(value)
    }, (error: unknown) => {
      if (!list.settle(dispatch)) return
      const answer = dispatch.recovers(error)
      if (answer === undefined) return dispatch.failed(this.failure(dispatch, error))
      this.breaker.success()
      this.failing.succeeded(dispatch.key)
      dispatch.answered(answer)
    })
  }

  private inFlightList(timeoutMs: number): InFlightList<Dispatch<unknown>> {
    return new InFlightList(timeoutMs, (command) => {
      command.failed(this.failure(command, new RedisUnavailableError(`redis ${command.operation} timed out after ${timeoutMs} ms`)))
    })
  }

  /** A command failed: the breaker's and the outage clock's accounting; the error to report, typed. */
  private failure(command: Dispatch<unknown>, error: unknown): RedisUnavailableError {
    const { operation } = command
    if (!command.retry) this.breaker.failure()
    this.failing.failed(command.key, performance.now())
    if (this.breaker.isOpen()) this.budget.failQueued(new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`))
    this.events.emit('redis-error', { operation, error })
    return error instanceof RedisUnavailableError ? error : new RedisUnavailableError(`redis ${operation} failed: ${(error as Error)?.message}`, error)
  }
}

/** A command whose caller awaits a promise (send). */
class Settles<T> extends Dispatch<T> {
  constructor(operation: string, retry: boolean, readonly send: () => Promise<T>, readonly answered: (value: T) => void, readonly failed: (error: Error) => void, key?: string) {
    super(operation, retry)
    this.key = key
  }
}
