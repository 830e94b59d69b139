import type { Cluster, Redis } from 'ioredis'
import type { CacheEmitter } from '../../events.js'
import { releaseAbandoned } from '../../redis/abandoned.js'
import type { CircuitBreaker } from './breaker.js'
import { CommandChannel } from './command-channel.js'
import { keyPrefixOf } from '../../redis/keys.js'
import type { EntryKeys } from './keys.js'
import { getOne, promisedRead, type FreshRead, type FreshReader } from './fresh-reads.js'
import { lookupFrom, type Lookup, type LookupReply } from './lookup-reply.js'

export type { Lookup } from './lookup-reply.js'
import { RenewalBatch } from '../../redis/renewals.js'
import { clusterKeyOf } from '../../redis/batches.js'
import { execWithReplicaWait, type ReplicaWait } from '../../redis/replicas.js'
import { defineScripts, type ScriptedClient } from './scripts.js'
import { ServerClock } from '../../redis/server-clock.js'
import type { ServerProbe } from '../../redis/server-probe.js'

export type LookupMode = 'read' | 'refresh' | 'token'

/** An invalidation to publish with a write: on `channel`, `message`. */
export interface Broadcast {
  channel: string
  message: string
  /**
   * Not published by the commit: its caller announces the write once it is done, batched with
   * the tick's other invalidations (set(), see invalidations.ts). The undo of a late commit
   * still publishes it.
   */
  afterWrite?: boolean
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
  /** How each command is sent and accounted: budget, timeouts, breaker, failovers (command-channel.ts). */
  private readonly channel: CommandChannel
  /** The server clock, from the times scripts return: turns a fresh copy's deadlines into local ones. */
  readonly clock = new ServerClock()
  /** Lease renewals of one tick, sent as one extend-many.lua call (see renewals.ts). */
  private readonly renewals: RenewalBatch
  /** See `clusterKeyOf` (batches.ts). */
  readonly clusterKeyOf: ((key: string) => string) | undefined
  private readonly cluster: boolean
  private clockSync: Promise<void> | undefined

  /** @internal */
  constructor(
    client: Redis | Cluster,
    private readonly timeoutMs: number,
    breaker: CircuitBreaker,
    private readonly events: CacheEmitter,
    private readonly probe: ServerProbe,
    /** See `redisFailoverWait`; only used on a client that can fail over. */
    failoverWaitMs = 0,
    /** See `lock.waitForReplicas`: WAIT after each lookup, in the same round trip. */
    private readonly replicaWait?: ReplicaWait,
    commands: { maxInFlight: number; maxQueued: number } = { maxInFlight: 256, maxQueued: 50_000 },
  ) {
    this.client = defineScripts(client)
    this.channel = new CommandChannel(this.client, timeoutMs, breaker, events, failoverWaitMs, commands)
    this.cluster = client.isCluster === true
    this.keyPrefix = keyPrefixOf(client)
    this.clusterKeyOf = clusterKeyOf(client)
    // A batch's keys share one slot on a Cluster: the first stands for them in the failing clock.
    this.renewals = new RenewalBatch(
      (locks, args) =>
        this.call('extend', locks[0], () => this.client.stampedeGuardExtendMany(locks.length, ...locks, ...args)),
      this.clusterKeyOf,
    )
  }

  /** Removes our listeners from the client, which outlives the cache. */
  close(): void {
    this.channel.close()
  }

  /**
   * The fresh hit: one GET of the fresh copy, which exists exactly while the value is
   * fresh by the server clock. A key of a foreign type is reported, not an outage.
   *
   * Each read takes one slot of the command budget, as a script call does, and reads that
   * got their slot in the same turn of the event loop go out together as one MGET: the budget bounds the keys
   * in flight, not the round trips, so batching cannot put 16 times more work in flight
   * behind one `redisTimeout`, and a read past `maxQueued` is refused like any command.
   */
  getFresh(freshKey: string): Promise<FreshRead> {
    return promisedRead(freshKey, (reader) => this.readFresh(reader))
  }

  /** getFresh, telling `reader` instead of settling a promise (the fresh hit's path). */
  readFresh(reader: FreshReader): void {
    // On a Cluster the keys of one turn are in many slots, and MGET needs one.
    // A retry through a failover goes alone, by call(), which keeps it out of the breaker's count.
    if (this.cluster || this.channel.startingRetry) {
      this.call('get', reader.freshKey, () => getOne(this.client, reader.freshKey)).then(
        (read) => reader.found(read),
        (error: unknown) => reader.failed(error),
      )
      return
    }
    this.channel.reads.read(reader)
  }

  /** See CommandChannel.throughFailover. */
  throughFailover<T>(
    operation: () => Promise<T>,
    deadline: number,
    retryMs: number,
    options: { key?: string; patient?: boolean } = {},
  ): Promise<T> {
    return this.channel.throughFailover(operation, deadline, retryMs, options)
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
    if (this.channel.connectionLost()) return Promise.resolve()
    const sentAt = performance.now()
    const measured = this.client.time().then(
      ([seconds, micros]) => {
        this.clock.observe(Number(seconds) * 1000 + Math.floor(Number(micros) / 1000), sentAt, performance.now())
      },
      () => {
        // Redis is unavailable: lookups take the script path, which measures the clock too.
      },
    )
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
  async getOrLock(
    keys: EntryKeys,
    owner: string,
    leaseMs: number,
    mode: LookupMode,
    retentionMs: number,
    refreshBelowMs = -1,
    onAbandoned?: () => void,
  ): Promise<Lookup> {
    // The Buffer variant: the value's bytes must not go through UTF-8 (a BinaryValue's payload).
    const args = [
      keys.entry,
      keys.lock,
      keys.fresh,
      owner,
      leaseMs,
      mode,
      retentionMs,
      Math.round(refreshBelowMs),
    ] as const
    let acknowledged: number | undefined
    let sent = false
    let sentAt = performance.now()
    const reply = (await this.call(
      'getOrLock',
      keys.entry,
      async () => {
        sent = true
        sentAt = performance.now() // not while it waited for a slot: the lease and the clock count from here
        if (!this.replicaWait) return this.client.stampedeGuardGetOrLockBuffer(...args)
        const { replies, acknowledged: count } = await execWithReplicaWait(
          this.client,
          (pipeline) => (pipeline as unknown as ScriptedClient).stampedeGuardGetOrLockBuffer(...args),
          this.replicaWait,
        )
        acknowledged = count
        return replies[0]
      },
      this.replicaWait?.timeoutMs,
    ).catch((error: unknown) => {
      // Sent and not answered: it may still take the lock later, for nobody. Undo that behind it.
      if (sent) {
        if (onAbandoned) onAbandoned()
        else this.releaseAbandoned(keys, owner)
      }
      throw error
    })) as LookupReply
    const lookup = lookupFrom(reply, sentAt, acknowledged)
    this.clock.observe(lookup.serverNow, sentAt, performance.now())
    return lookup
  }

  /**
   * get-or-lock in mode 'read' for `entries` of one slot, in one get-or-lock-many.lua call
   * (getOrLoadMany): one `Lookup` per entry, in order. Sent and not answered: `onAbandoned`
   * (each entry's lock may be taken yet, for its owner: the caller releases it once done).
   */
  async getOrLockMany(
    entries: readonly { keys: EntryKeys; owner: string }[],
    leaseMs: number,
    retentionMs: number,
    onAbandoned: () => void,
  ): Promise<Lookup[]> {
    const keys = entries.flatMap(({ keys }) => [keys.entry, keys.lock, keys.fresh])
    const args = [keys.length, ...keys, leaseMs, retentionMs, ...entries.map(({ owner }) => owner)]
    let sent = false
    let sentAt = performance.now()
    const replies = (await this.call('getOrLockMany', keys[0], () => {
      sent = true
      sentAt = performance.now()
      return this.client.stampedeGuardGetOrLockManyBuffer(...args)
    }).catch((error: unknown) => {
      if (sent) onAbandoned()
      throw error
    })) as LookupReply[]
    const lookups = replies.map((reply) => lookupFrom(reply, sentAt))
    if (lookups[0]) this.clock.observe(lookups[0].serverNow, sentAt, performance.now())
    return lookups
  }

  /** The fresh copies of `freshKeys` (of one slot on a Cluster) in one MGET: what each read found, in order. */
  readFreshMany(freshKeys: readonly string[]): Promise<FreshRead[]> {
    return this.call('mget', freshKeys[0], () => this.client.mgetBuffer(...freshKeys))
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
  async commit(
    keys: EntryKeys,
    request: CommitRequest,
    broadcast?: Broadcast,
    undoLate?: number,
  ): Promise<string | undefined> {
    const { lockValue, token, data, freshMs, graceMs, fallbackMs, loadMs } = request // freshMs is the ttl
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    const sentAt = performance.now()
    let sent = false
    const [written, , now, version, corrupt] = (await this.call('commit', keys.entry, () => {
      sent = true
      return this.client.stampedeGuardCommit(
        keys.entry,
        keys.lock,
        keys.channel,
        keys.fresh,
        lockValue,
        token,
        data,
        freshMs,
        graceMs,
        fallbackMs,
        Math.round(loadMs),
        publish,
        ...this.broadcastArgs(broadcast?.afterWrite ? undefined : broadcast),
      )
    }).catch((error: unknown) => {
      if (sent && undoLate !== undefined)
        this.client
          .stampedeGuardInvalidate(2, keys.entry, keys.fresh, undoLate, ...this.broadcastArgs(broadcast))
          .catch(() => {})
      throw error
    })) as [number, number, string, string, number]
    this.clock.observe(Number(now), sentAt, performance.now())
    this.reportCorrupt(keys, corrupt)
    return written === 1 ? version : undefined
  }

  async release(
    keys: EntryKeys,
    lockValue: string,
    message: string,
    marks: { backoffMs?: number; passMs?: number; negativeMs?: number } = {},
  ): Promise<boolean> {
    const { backoffMs = 0, passMs = 0, negativeMs = 0 } = marks
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    const [released, corrupt] = (await this.call('release', keys.entry, () =>
      this.client.stampedeGuardRelease(
        keys.entry,
        keys.lock,
        keys.channel,
        lockValue,
        message,
        backoffMs,
        passMs,
        publish,
        negativeMs,
      ),
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

  /**
   * Deletes each entry's value, keeps its fence, and publishes `broadcast` in the same script
   * (entries of one slot on a Cluster; none: the broadcast alone).
   */
  async invalidate(entries: readonly EntryKeys[], retentionMs: number, broadcast?: Broadcast): Promise<void> {
    const names = entries.flatMap((keys) => [keys.entry, keys.fresh])
    const found = await this.call('invalidate', names[0], () =>
      this.client.stampedeGuardInvalidate(names.length, ...names, retentionMs, ...this.broadcastArgs(broadcast)),
    )
    if (Array.isArray(found)) entries.forEach((keys, i) => this.reportCorrupt(keys, found[i]))
  }

  /** A script found planted or corrupted data at the entry's keys, and repaired it (see fields.lua). */
  private reportCorrupt(keys: EntryKeys, corrupt: unknown): void {
    if (corrupt === 1) this.events.emit('corrupt', { key: keys.key })
  }

  /** A command of another module (the tag scripts), bounded and guarded as the store's own are. */
  run<T>(operation: string, command: () => Promise<T>): Promise<T> {
    return this.channel.run(operation, command)
  }

  /** See CommandChannel.fanOut: at most `redisCommands.maxInFlight` sends at a time. */
  fanOut<T, R>(items: readonly T[], send: (item: T) => Promise<R>): Promise<R[]> {
    return this.channel.fanOut(items, send)
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

  /** See CommandChannel.call. */
  private call<T>(operation: string, key: string | undefined, command: () => Promise<T>, extraMs = 0): Promise<T> {
    return this.channel.call(operation, key, command, extraMs)
  }
}
