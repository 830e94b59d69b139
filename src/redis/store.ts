import type { Cluster, Redis } from 'ioredis'
import type { Lifetimes } from '../entry.js'
import type { CacheEmitter } from '../events.js'
import { RedisUnavailableError } from '../errors.js'
import type { CircuitBreaker } from './breaker.js'
import { delay } from '../timers.js'
import type { EntryKeys } from './keys.js'
import { defineScripts, type ScriptedClient } from './scripts.js'
import type { ServerProbe } from './server-probe.js'
import { execWithReplicaWait, type ReplicaWait } from './replicas.js'

export type LookupMode = 'read' | 'refresh' | 'token'

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
  data: string
  life: Lifetimes
  corrupt: boolean
  /** With a replica wait: how many replicas acknowledged the lookup's writes (the lock). */
  acknowledged?: number
}

/** What the leader writes: the encoded value and its lifetimes from now, in ms. */
export interface CommitRequest {
  lockValue: string
  token: string
  data: string
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
  private readonly inFlight = new Set<(error: Error) => void>()
  private readonly connection: NodeJS.EventEmitter
  private readonly onReady = () => (this.connectedOnce = true)
  /** Commands already sent when the connection drops would be retried after a reconnect: fail them now. */
  private readonly onClose = () => {
    for (const fail of this.inFlight) fail(new RedisUnavailableError('redis connection lost'))
    this.inFlight.clear()
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
  ) {
    this.client = defineScripts(client)
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

  /** `refreshBelowMs`: in 'refresh' mode, only refresh a value fresh for at most this long (-1: always). */
  async getOrLock(keys: EntryKeys, owner: string, leaseMs: number, mode: LookupMode, retentionMs: number, refreshBelowMs = -1): Promise<Lookup> {
    const args = [keys.entry, keys.lock, owner, leaseMs, mode, retentionMs, Math.round(refreshBelowMs)] as const
    let acknowledged: number | undefined
    const reply = (await this.call('getOrLock', async () => {
      if (!this.replicaWait) return this.client.stampedeGuardGetOrLock(...args)
      const { replies, acknowledged: count } = await execWithReplicaWait(this.client, (pipeline) => (pipeline as unknown as ScriptedClient).stampedeGuardGetOrLock(...args), this.replicaWait)
      acknowledged = count
      return replies[0]
    }, this.replicaWait?.timeoutMs)) as [Lookup['state'], Lookup['lock'], string, string, number, number, number, number, number, number]
    const [state, lock, lockArg, data, freshMs, graceMs, fallbackMs, loadMs, corrupt, ttlMs] = reply
    return { state, lock, lockArg, data, life: { freshMs, graceMs, fallbackMs, loadMs, ttlMs: ttlMs || freshMs }, corrupt: corrupt === 1, acknowledged }
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

  /** Returns whether the value was written (false: fenced out by a newer token). */
  async commit(keys: EntryKeys, request: CommitRequest): Promise<boolean> {
    const { lockValue, token, data, freshMs, graceMs, fallbackMs, loadMs } = request // freshMs is the ttl
    const known = this.publishCommand()
    const publish = typeof known === 'string' ? known : await known
    const [written] = (await this.call('commit', () =>
      this.client.stampedeGuardCommit(keys.entry, keys.lock, keys.channel, lockValue, token, data, freshMs, graceMs, fallbackMs, Math.round(loadMs), publish),
    )) as [number, number]
    return written === 1
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

  async invalidate(keys: EntryKeys, retentionMs: number): Promise<void> {
    await this.call('invalidate', () => this.client.stampedeGuardInvalidate(keys.entry, retentionMs))
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

  /** PUBLISH takes no key, so ioredis does not apply `keyPrefix`: add it, as the subscriber does. */
  async broadcast(channel: string, message: string): Promise<void> {
    await this.call('publish', () => this.client.publish(this.keyPrefix + channel, message))
  }

  /** `extraMs`: added to the timeout for a command that waits on the server on purpose (WAIT). */
  private async call<T>(operation: string, command: () => Promise<T>, extraMs = 0): Promise<T> {
    // A retry through a failover goes to Redis even past an open breaker: it has already been
    // judged worth it (within redisFailoverWait), and an open breaker would only skip it to no end.
    const retry = this.retrying
    if (!retry && !this.breaker.allow()) throw new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`)
    try {
      // A client that was connected and lost its connection would queue the command until it
      // reconnects: fail at once instead of after redisTimeout. Before the first connection,
      // commands may wait for it (a starting process should not skip Redis).
      if (this.connectedOnce && this.client.status !== 'ready') throw new RedisUnavailableError(`redis ${operation} skipped: connection is ${this.client.status}`)
      // Settles with the reply, after timeoutMs, or when the connection drops, whichever is first.
      const result = await new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => reject(new RedisUnavailableError(`redis ${operation} timed out after ${this.timeoutMs + extraMs} ms`)), this.timeoutMs + extraMs)
        timer.unref()
        this.inFlight.add(reject)
        command().then(resolve, reject).finally(() => {
          clearTimeout(timer)
          this.inFlight.delete(reject)
        })
      })
      this.breaker.success()
      this.failingSince = undefined
      return result
    } catch (error) {
      if (!retry) this.breaker.failure()
      this.failingSince ??= performance.now()
      this.events.emit('redis-error', { operation, error })
      throw error instanceof RedisUnavailableError ? error : new RedisUnavailableError(`redis ${operation} failed: ${(error as Error)?.message}`, error)
    }
  }
}
