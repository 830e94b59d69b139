import type { Cluster, Redis } from 'ioredis'
import type { Lifetimes } from '../entry.js'
import type { CacheEmitter } from '../events.js'
import { RedisUnavailableError } from '../errors.js'
import { releaseAbandoned } from './abandoned.js'
import type { CircuitBreaker } from './breaker.js'
import { delay } from '../timers.js'
import { CommandBudget } from './command-budget.js'
import type { EntryKeys } from './keys.js'
import { FreshReadBatch, getOne, promisedRead, type FreshRead, type FreshReader } from './fresh-reads.js'
import { Dispatch, InFlightList } from './in-flight.js'
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
  /** With a replica wait: how many replicas acknowledged the lookup's writes (the lock). */
  acknowledged?: number
  /** performance.now() when it was sent: the script ran later, so `life` counted from here never outlasts Redis's. */
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
  /** performance.now() of the first failure since the last success: how long Redis has been failing. */
  private failingSince: number | undefined
  private connectedOnce: boolean
  /** Commands sent and not answered, on one timer for their timeouts: the plain ones, and those that also WAIT. */
  private readonly inFlight: InFlightList<Dispatch<unknown>>
  private inFlightWaiting: InFlightList<Dispatch<unknown>> | undefined
  private readonly budget: CommandBudget
  /** The server clock, from the times scripts return: turns a fresh copy's deadlines into local ones. */
  readonly clock = new ServerClock()
  /** Fresh-copy reads of this tick, sent as one MGET (see getFresh, fresh-reads.ts). */
  private readonly reads: FreshReadBatch
  private readonly cluster: boolean
  private clockSync: Promise<void> | undefined
  private readonly connection: NodeJS.EventEmitter
  private readonly onReady = () => (this.connectedOnce = true)
  /** Commands already sent when the connection drops would be retried after a reconnect: fail them now, and the queued ones. */
  private readonly onClose = () => {
    const lost = new RedisUnavailableError('redis connection lost')
    const fail = (command: Dispatch<unknown>) => command.failed(this.failure(command.operation, lost, command.retry))
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
    this.failsOver = canFailOver(client)
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
      this.call('get', () => getOne(this.client, reader.freshKey)).then((read) => reader.found(read), (error: unknown) => reader.failed(error))
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
   */
  async throughFailover<T>(operation: () => Promise<T>, deadline: number, retryMs: number): Promise<T> {
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
        const failingFor = now - Math.min(this.failingSince ?? now, firstFailure)
        if (!this.failsOver || failingFor >= this.failoverWaitMs || now + retryMs >= deadline) throw error
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

  /** `refreshBelowMs`: in 'refresh' mode, only refresh a value fresh for at most this long (-1: always). */
  async getOrLock(keys: EntryKeys, owner: string, leaseMs: number, mode: LookupMode, retentionMs: number, refreshBelowMs = -1): Promise<Lookup> {
    // The Buffer variant: the value's bytes must not go through UTF-8 (a BinaryValue's payload).
    const args = [keys.entry, keys.lock, keys.fresh, owner, leaseMs, mode, retentionMs, Math.round(refreshBelowMs)] as const
    let acknowledged: number | undefined
    let sent = false
    const sentAt = performance.now()
    const reply = (await this.call('getOrLock', async () => {
      sent = true
      if (!this.replicaWait) return this.client.stampedeGuardGetOrLockBuffer(...args)
      const { replies, acknowledged: count } = await execWithReplicaWait(this.client, (pipeline) => (pipeline as unknown as ScriptedClient).stampedeGuardGetOrLockBuffer(...args), this.replicaWait)
      acknowledged = count
      return replies[0]
    }, this.replicaWait?.timeoutMs).catch((error: unknown) => {
      // Sent and not answered: it may still take the lock later, for nobody. Undo that behind it.
      if (sent) releaseAbandoned(this.client, keys, owner)
      throw error
    })) as [Buffer, Buffer, Buffer, Buffer, number, number, number, number, number, number, Buffer, Buffer]
    this.clock.observe(Number(String(reply[10])), sentAt, performance.now())
    const [state, lock, lockArg, data, freshMs, graceMs, fallbackMs, loadMs, corrupt, ttlMs, , version] = reply
    return {
      state: String(state) as Lookup['state'],
      lock: String(lock) as Lookup['lock'],
      lockArg: String(lockArg),
      data,
      life: { freshMs, graceMs, fallbackMs, loadMs, ttlMs: ttlMs || freshMs },
      corrupt: corrupt === 1,
      version: String(version),
      acknowledged,
      sentAt,
    }
  }

  /**
   * Returns the version (fencing token) it was written with, or undefined when fenced out by
   * a newer one. With `broadcast` (set()), the invalidation is published in the same script.
   */
  async commit(keys: EntryKeys, request: CommitRequest, broadcast?: Broadcast): Promise<string | undefined> {
    const { lockValue, token, data, freshMs, graceMs, fallbackMs, loadMs } = request // freshMs is the ttl
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    const sentAt = performance.now()
    const [written, , now, version] = (await this.call('commit', () =>
      this.client.stampedeGuardCommit(keys.entry, keys.lock, keys.channel, keys.fresh, lockValue, token, data, freshMs, graceMs, fallbackMs, Math.round(loadMs), publish, ...this.broadcastArgs(broadcast)),
    )) as [number, number, string, string]
    this.clock.observe(Number(now), sentAt, performance.now())
    return written === 1 ? version : undefined
  }

  async release(keys: EntryKeys, lockValue: string, message: string, marks: { backoffMs?: number; passMs?: number; negativeMs?: number } = {}): Promise<boolean> {
    const { backoffMs = 0, passMs = 0, negativeMs = 0 } = marks
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    const released = await this.call('release', () =>
      this.client.stampedeGuardRelease(keys.entry, keys.lock, keys.channel, lockValue, message, backoffMs, passMs, publish, negativeMs),
    )
    return released === 1
  }

  async extend(keys: EntryKeys, lockValue: string, leaseMs: number): Promise<boolean> {
    return (await this.call('extend', () => this.client.stampedeGuardExtend(keys.lock, lockValue, leaseMs))) === 1
  }

  /** Deletes the value, keeps the fence, and publishes `broadcast` in the same script. */
  async invalidate(keys: EntryKeys, retentionMs: number, broadcast?: Broadcast): Promise<void> {
    await this.call('invalidate', () => this.client.stampedeGuardInvalidate(keys.entry, keys.fresh, retentionMs, ...this.broadcastArgs(broadcast)))
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
   * `extraMs`: added to the timeout for a command that waits on the server on purpose (WAIT).
   */
  private async call<T>(operation: string, command: () => Promise<T>, extraMs = 0): Promise<T> {
    // A retry through a failover goes to Redis even past an open breaker: it has already been
    // judged worth it (within redisFailoverWait), and an open breaker would only skip it to no end.
    // Read before the first await (throughFailover sets it only while it calls us).
    const retry = this.retrying
    // Commands reach Redis in the order they were asked for: reads of this tick go first.
    if (this.reads.pending && operation !== 'get' && operation !== 'mget') this.reads.sendReads()
    if (!retry && !this.breaker.allow()) throw new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`)
    const waiting = this.budget.acquire(LOCK_HOLDER_OPERATIONS.has(operation))
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
      return await this.send(operation, command, extraMs, retry)
    } finally {
      this.budget.release()
    }
  }

  /** One command with its own timeout, started now that it is sent; `retry`: a retry through a failover, not counted by the breaker. */
  private send<T>(operation: string, command: () => Promise<T>, extraMs = 0, retry = false): Promise<T> {
    return new Promise<T>((resolve, reject) => this.dispatch(new Settles(operation, retry, command, resolve, reject), extraMs))
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
      dispatch.failed(this.failure(dispatch.operation, new RedisUnavailableError(`redis ${dispatch.operation} skipped: connection is ${this.client.status}`), dispatch.retry))
      return
    }
    const list = (extraMs === 0 ? this.inFlight : (this.inFlightWaiting ??= this.inFlightList(this.timeoutMs + extraMs))) as InFlightList<Dispatch<T>>
    list.add(dispatch)
    dispatch.send().then((value) => {
      if (!list.settle(dispatch)) return
      this.breaker.success()
      this.failingSince = undefined
      dispatch.answered(value)
    }, (error: unknown) => {
      if (!list.settle(dispatch)) return
      const answer = dispatch.recovers(error)
      if (answer === undefined) return dispatch.failed(this.failure(dispatch.operation, error, dispatch.retry))
      this.breaker.success()
      this.failingSince = undefined
      dispatch.answered(answer)
    })
  }

  private inFlightList(timeoutMs: number): InFlightList<Dispatch<unknown>> {
    return new InFlightList(timeoutMs, (command) => {
      command.failed(this.failure(command.operation, new RedisUnavailableError(`redis ${command.operation} timed out after ${timeoutMs} ms`), command.retry))
    })
  }

  /** A command failed: the breaker's and the outage clock's accounting; the error to report, typed. */
  private failure(operation: string, error: unknown, retry: boolean): RedisUnavailableError {
    if (!retry) this.breaker.failure()
    this.failingSince ??= performance.now()
    if (this.breaker.isOpen()) this.budget.failQueued(new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`))
    this.events.emit('redis-error', { operation, error })
    return error instanceof RedisUnavailableError ? error : new RedisUnavailableError(`redis ${operation} failed: ${(error as Error)?.message}`, error)
  }
}

/** A command whose caller awaits a promise (send). */
class Settles<T> extends Dispatch<T> {
  constructor(operation: string, retry: boolean, readonly send: () => Promise<T>, readonly answered: (value: T) => void, readonly failed: (error: Error) => void) {
    super(operation, retry)
  }
}
