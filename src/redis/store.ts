import type { Cluster, Redis } from 'ioredis'
import type { Lifetimes } from '../entry.js'
import type { CacheEmitter } from '../events.js'
import { RedisUnavailableError } from '../errors.js'
import type { CircuitBreaker } from './breaker.js'
import { CommandBudget } from './command-budget.js'
import type { EntryKeys } from './keys.js'
import { defineScripts, type ScriptedClient } from './scripts.js'

export type LookupMode = 'read' | 'refresh' | 'token'

/** Commands of a process that holds a lock: they skip ahead of queued lookups. */
const LOCK_HOLDER_OPERATIONS = new Set(['extend', 'commit', 'release'])

/** ioredis prefixes KEYS (so our channels inside scripts) but neither PUBLISH nor SUBSCRIBE arguments. */
export function keyPrefixOf(client: Redis | Cluster): string {
  return (client.options as { keyPrefix?: string }).keyPrefix ?? ''
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
  private readonly publish: 'PUBLISH' | 'SPUBLISH'
  private readonly keyPrefix: string
  private connectedOnce: boolean
  private readonly inFlight = new Set<(error: Error) => void>()
  private readonly budget: CommandBudget
  private readonly connection: NodeJS.EventEmitter
  private readonly onReady = () => (this.connectedOnce = true)
  /** Commands already sent when the connection drops would be retried after a reconnect: fail them now, and the queued ones. */
  private readonly onClose = () => {
    const lost = new RedisUnavailableError('redis connection lost')
    for (const fail of this.inFlight) fail(lost)
    this.inFlight.clear()
    this.budget.failQueued(lost)
  }

  constructor(
    client: Redis | Cluster,
    private readonly timeoutMs: number,
    private readonly breaker: CircuitBreaker,
    private readonly events: CacheEmitter,
    sharded: boolean,
    commands: { maxInFlight: number; maxQueued: number } = { maxInFlight: 256, maxQueued: 50_000 },
  ) {
    this.budget = new CommandBudget(commands.maxInFlight, commands.maxQueued)
    this.publish = sharded ? 'SPUBLISH' : 'PUBLISH'
    this.client = defineScripts(client)
    this.keyPrefix = keyPrefixOf(client)
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
    const reply = (await this.call('getOrLock', () =>
      this.client.stampedeGuardGetOrLock(keys.entry, keys.lock, owner, leaseMs, mode, retentionMs, Math.round(refreshBelowMs)),
    )) as [Lookup['state'], Lookup['lock'], string, string, number, number, number, number, number, number]
    const [state, lock, lockArg, data, freshMs, graceMs, fallbackMs, loadMs, corrupt, ttlMs] = reply
    return { state, lock, lockArg, data, life: { freshMs, graceMs, fallbackMs, loadMs, ttlMs: ttlMs || freshMs }, corrupt: corrupt === 1 }
  }

  /** Returns whether the value was written (false: fenced out by a newer token). */
  async commit(keys: EntryKeys, request: CommitRequest): Promise<boolean> {
    const { lockValue, token, data, freshMs, graceMs, fallbackMs, loadMs } = request // freshMs is the ttl
    const [written] = (await this.call('commit', () =>
      this.client.stampedeGuardCommit(keys.entry, keys.lock, keys.channel, lockValue, token, data, freshMs, graceMs, fallbackMs, Math.round(loadMs), this.publish),
    )) as [number, number]
    return written === 1
  }

  async release(keys: EntryKeys, lockValue: string, message: string, marks: { backoffMs?: number; passMs?: number; negativeMs?: number } = {}): Promise<boolean> {
    const { backoffMs = 0, passMs = 0, negativeMs = 0 } = marks
    const released = await this.call('release', () =>
      this.client.stampedeGuardRelease(keys.entry, keys.lock, keys.channel, lockValue, message, backoffMs, passMs, this.publish, negativeMs),
    )
    return released === 1
  }

  async extend(keys: EntryKeys, lockValue: string, leaseMs: number): Promise<boolean> {
    return (await this.call('extend', () => this.client.stampedeGuardExtend(keys.lock, lockValue, leaseMs))) === 1
  }

  async invalidate(keys: EntryKeys, retentionMs: number): Promise<void> {
    await this.call('invalidate', () => this.client.stampedeGuardInvalidate(keys.entry, retentionMs))
  }

  /** PUBLISH takes no key, so ioredis does not apply `keyPrefix`: add it, as the subscriber does. */
  async broadcast(channel: string, message: string): Promise<void> {
    await this.call('publish', () => this.client.publish(this.keyPrefix + channel, message))
  }

  /** Commands, bounded by the budget of commands in flight; lock holders' commands queue first. */
  private async call<T>(operation: string, command: () => Promise<T>): Promise<T> {
    if (!this.breaker.allow()) throw new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`)
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
      return await this.send(operation, command)
    } finally {
      this.budget.release()
    }
  }

  /** One command with its own timeout, started now that it is sent. */
  private async send<T>(operation: string, command: () => Promise<T>): Promise<T> {
    try {
      // A client that was connected and lost its connection would queue the command until it
      // reconnects: fail at once instead of after redisTimeout. Before the first connection,
      // commands may wait for it (a starting process should not skip Redis).
      if (this.connectedOnce && this.client.status !== 'ready') throw new RedisUnavailableError(`redis ${operation} skipped: connection is ${this.client.status}`)
      // Settles with the reply, after timeoutMs, or when the connection drops, whichever is first.
      const result = await new Promise<T>((resolve, reject) => {
        // Declared timed out only after the event loop has read what already arrived
        // (setImmediate runs after the I/O phase): a busy loop delays replies, it does not lose them.
        const timedOut = () => reject(new RedisUnavailableError(`redis ${operation} timed out after ${this.timeoutMs} ms`))
        const timer = setTimeout(() => setImmediate(timedOut), this.timeoutMs)
        timer.unref()
        this.inFlight.add(reject)
        command().then(resolve, reject).finally(() => {
          clearTimeout(timer)
          this.inFlight.delete(reject)
        })
      })
      this.breaker.success()
      return result
    } catch (error) {
      this.breaker.failure()
      if (this.breaker.isOpen()) this.budget.failQueued(new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`))
      this.events.emit('redis-error', { operation, error })
      throw error instanceof RedisUnavailableError ? error : new RedisUnavailableError(`redis ${operation} failed: ${(error as Error)?.message}`, error)
    }
  }
}
