import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { LoadContext, type Loader } from './context.js'
import { entryFrom, fallbackValid, type Entry, type Lifetimes } from './entry.js'
import { CacheClosedError, InvalidArgumentError, SerializationError, LoaderTimeoutError, LockWaitTimeoutError, RedisUnavailableError, RemoteLoaderError } from './errors.js'
import { CacheEmitter, type CacheEventName, type CacheEvents, type CacheStats, type StaleReason } from './events.js'
import { MemoryTier } from './memory/l1.js'
import { SingleFlight } from './memory/single-flight.js'
import { resolveCallPolicy, resolveSettings, type CacheOptions, type Policy, type PolicyOptions, type Settings } from './options.js'
import { CircuitBreaker } from './redis/breaker.js'
import { entryKeys, invalidationChannel, type EntryKeys } from './redis/keys.js'
import { Lease } from './redis/lease.js'
import { Notifier, type Subscription } from './redis/notifier.js'
import { RedisStore, type Lookup, type LookupMode } from './redis/store.js'
import { delay } from './timers.js'

/**
 * How a caller's value was obtained:
 * - `hit`: fresh, from L1 or Redis;
 * - `stale`: a stale value (grace, fail-safe, backoff, soft or wait timeout);
 * - `loaded`: this caller's own loader produced it;
 * - `coalesced`: another caller's loader produced it (in this process or another).
 */
export type LoadOutcome = 'hit' | 'stale' | 'loaded' | 'coalesced'

export interface LoadResult<V> {
  value: V
  outcome: LoadOutcome
}

/** What one flight resolves to. `shareable: false` means its followers must run their own loaders. */
interface Resolution<V> extends LoadResult<V> {
  shareable: boolean
}

/** A lock (or bare token) this process holds for one load. */
interface Claim {
  keys: EntryKeys
  token: string
  /** '' when loading without the lock (after a wait timeout): nothing to renew or release. */
  lockValue: string
}

const NEVER_ABORTED = new AbortController().signal
/** Slack for the round trip between reading an entry's remaining life and asking Redis. */
const REFRESH_TOLERANCE_MS = 50

/**
 * The cache. Every `getOrLoad` walks one state machine:
 *
 *   L1 fresh → return (no await)                     L1 in grace → return stale, refresh in background
 *   else, once per key per process (single-flight): `resolve()`
 *     Redis fresh → return          grace → return stale (+ refresh if we won the lock)
 *     lock won → `lead()`           lock held → subscribe, re-check, wait for the commit message
 *     backoff → return stale        pass (hit-for-miss) → run own loader, store nothing
 *     error (negative caching) → the recent loader error, or stale
 *     Redis unavailable → `lead()` in-process only
 */
export class Cache {
  private readonly settings: Settings
  private readonly events = new CacheEmitter()
  private readonly memory: MemoryTier | undefined
  private readonly flights = new SingleFlight<Resolution<unknown>>()
  /** Keys deleted while a flight for them was in flight; that flight must not fill L1. */
  private readonly invalidated = new Set<string>()
  private readonly background = new Set<Promise<unknown>>()
  private readonly store: RedisStore | undefined
  private readonly notifier: Notifier | undefined
  private readonly retentionMs: number
  private closed = false

  constructor(options: CacheOptions) {
    this.settings = resolveSettings(options)
    const { l1, lock, redisTimeout, breaker, namespace } = this.settings
    this.retentionMs = lock.maxHold + lock.lease
    if (l1) this.memory = new MemoryTier(l1.max, l1.maxTtl)
    if (options.redis) {
      const client: Redis | Cluster = options.redis
      if (typeof client.defineCommand !== 'function' || typeof client.duplicate !== 'function') {
        throw new InvalidArgumentError('redis', 'must be an ioredis Redis or Cluster client')
      }
      this.store = new RedisStore(client, redisTimeout, new CircuitBreaker(breaker.threshold, breaker.openFor, this.events), this.events)
      this.notifier = new Notifier(client, redisTimeout)
      if (this.memory) this.notifier.listen(invalidationChannel(namespace), (key) => this.forget(key))
    }
  }

  // ── public API ────────────────────────────────────────────────────────────

  /**
   * The value for `key`: from L1, from Redis, from another process's load, or from
   * `loader` if this caller is elected to run it. Resolves with no await on an L1 hit.
   */
  getOrLoad<V>(key: string, loader: Loader<V>, options?: PolicyOptions): Promise<V> {
    let policy: Policy
    try {
      policy = this.prepare(key, loader, options)
    } catch (error) {
      return Promise.reject(error)
    }
    const served = this.serveFromMemory(key, loader as Loader<unknown>, policy)
    if (served) return Promise.resolve(served.value as V)
    return this.fly(key, loader, policy).then((resolution) => resolution.value)
  }

  /** As `getOrLoad`, and also says how the value was obtained (the middleware's `X-Cache`). */
  getOrLoadResult<V>(key: string, loader: Loader<V>, options?: PolicyOptions): Promise<LoadResult<V>> {
    let policy: Policy
    try {
      policy = this.prepare(key, loader, options)
    } catch (error) {
      return Promise.reject(error)
    }
    const served = this.serveFromMemory(key, loader as Loader<unknown>, policy)
    if (served) {
      const outcome = performance.now() < served.freshUntil ? 'hit' : 'stale'
      return Promise.resolve({ value: served.value as V, outcome })
    }
    return this.fly(key, loader, policy).then(({ value, outcome }) => ({ value, outcome }))
  }

  /** Stores `value` as a fresh load would (fenced: it supersedes every load in flight). */
  async set<V>(key: string, value: V, options?: PolicyOptions): Promise<void> {
    const policy = this.prepare(key, () => value, options)
    const context = new LoadContext<V>(key, NEVER_ABORTED, undefined, policy)
    await this.storeLoaded(key, undefined, value, context, 0)
  }

  /**
   * Removes `key` everywhere: this process's L1, Redis, and (over pub/sub) every other
   * process's L1. A load that began before this call cannot store its result after it.
   * Rejects with `RedisUnavailableError` if Redis could not be told.
   */
  async delete(key: string): Promise<void> {
    this.prepare(key, () => undefined, undefined)
    this.forget(key)
    if (!this.store) return
    await this.store.invalidate(entryKeys(this.settings.namespace, key), this.retentionMs)
    if (this.memory) await this.store.broadcast(invalidationChannel(this.settings.namespace), key).catch(() => {})
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on<E extends CacheEventName>(event: E, listener: (payload: CacheEvents[E]) => void): () => void {
    return this.events.on(event, listener)
  }

  /** Counters, one per event name, since the cache was created. */
  stats(): CacheStats {
    return this.events.stats()
  }

  /**
   * Stops accepting calls, waits for loads and background refreshes in flight, then
   * closes the subscriber connection. The Redis client you passed in stays open.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.allSettled([this.flights.drain(), ...this.background])
    this.notifier?.close()
    this.memory?.clear()
    this.events.removeAll()
  }

  // ── L1 ────────────────────────────────────────────────────────────────────

  private prepare(key: string, loader: unknown, options: PolicyOptions | undefined): Policy {
    if (this.closed) throw new CacheClosedError()
    if (typeof key !== 'string' || key.length === 0) throw new InvalidArgumentError('key', `must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}`)
    if (key.length > this.settings.maxKeyLength) throw new InvalidArgumentError('key', `is ${key.length} characters long; the maximum is ${this.settings.maxKeyLength} (maxKeyLength)`)
    if (typeof loader !== 'function') throw new InvalidArgumentError('loader', `must be a function, got ${typeof loader}`)
    return options === undefined ? this.settings.policy : resolveCallPolicy(this.settings.policy, options)
  }

  /** The synchronous hit path: a fresh or grace entry from L1, or undefined. */
  private serveFromMemory(key: string, loader: Loader<unknown>, policy: Policy): Entry | undefined {
    const entry = this.memory?.get(key)
    if (!entry) return undefined
    const now = performance.now()
    if (now < entry.freshUntil) {
      if (this.dueForEarlyRefresh(entry, policy, now)) this.refreshInBackground(key, loader, policy, 'refresh', entry)
      this.events.emit('hit', { key, tier: 'l1' })
      return entry
    }
    if (now < entry.graceUntil || (now < entry.backoffUntil && now < entry.fallbackUntil)) {
      const reason: StaleReason = now < entry.backoffUntil ? 'backoff' : 'grace'
      if (reason === 'grace') this.refreshInBackground(key, loader, policy, 'read', entry)
      this.events.emit('stale', { key, reason })
      return entry
    }
    return undefined
  }

  private dueForEarlyRefresh(entry: Entry, policy: Policy, now: number): boolean {
    const rule = policy.earlyRefresh
    if (rule.kind === 'off' || now < entry.refreshBlockedUntil) return false
    const remaining = entry.freshUntil - now
    if (rule.kind === 'threshold') return remaining <= policy.ttl * (1 - rule.fraction)
    // XFetch: refresh when now − δ·β·ln(rand) ≥ expiry.
    return -entry.loadMs * rule.beta * Math.log(Math.random()) >= remaining
  }

  private remember(key: string, entry: Entry, now = performance.now()): void {
    if (!this.invalidated.has(key)) this.memory?.set(key, entry, now)
  }

  /** Drops `key` from L1 and marks a flight in progress as outdated. */
  private forget(key: string): void {
    this.memory?.delete(key)
    if (this.flights.has(key)) this.invalidated.add(key)
  }

  // ── single-flight ─────────────────────────────────────────────────────────

  private fly<V>(key: string, loader: Loader<V>, policy: Policy): Promise<Resolution<V>> {
    const { promise, joined } = this.flights.run(key, () => this.resolve(key, loader as Loader<unknown>, policy).finally(() => this.invalidated.delete(key)))
    const flight = promise as Promise<Resolution<V>>
    if (!joined) return flight
    return flight.then((resolution) => {
      if (!resolution.shareable) return this.loadUncached(key, loader, policy)
      return resolution.outcome === 'loaded' ? { ...resolution, outcome: 'coalesced' } : resolution
    })
  }

  private refreshInBackground(key: string, loader: Loader<unknown>, policy: Policy, mode: LookupMode, entry: Entry): void {
    const now = performance.now()
    if (this.closed || now < entry.refreshBlockedUntil || this.flights.has(key)) return
    entry.refreshBlockedUntil = now + this.settings.lock.lease
    const { promise } = this.flights.run(key, () => this.refresh(key, loader, policy, mode, entry))
    this.track(promise)
  }

  private track(work: Promise<unknown>): void {
    const settled = work.then(() => {}, () => {})
    this.background.add(settled)
    settled.finally(() => this.background.delete(settled))
  }

  // ── the Redis state machine ───────────────────────────────────────────────

  /** One flight: decide from Redis who loads, then lead, wait, or serve. */
  private async resolve(key: string, loader: Loader<unknown>, policy: Policy): Promise<Resolution<unknown>> {
    const inMemory = this.memory?.get(key)
    let fallback = fallbackValid(inMemory, performance.now()) ? inMemory : undefined
    if (!this.store) return this.lead(key, loader, policy, undefined, fallback)

    const keys = entryKeys(this.settings.namespace, key)
    const owner = randomBytes(16).toString('hex')
    const { lease, pollInterval, maxPollInterval } = this.settings.lock
    let mode: LookupMode = 'read'
    let subscription: Subscription | undefined
    let waitDeadline = 0
    let poll = pollInterval
    try {
      for (;;) {
        const found = await this.store.getOrLock(keys, owner, lease, mode, this.retentionMs)
        const entry = this.decode(key, found)
        if (entry) fallback = entry
        const claim: Claim = { keys, token: found.lockArg, lockValue: `${owner}:${found.lockArg}` }

        if (entry && found.state === 'fresh' && found.lock !== 'won') {
          this.remember(key, entry)
          this.events.emit('hit', { key, tier: 'redis' })
          if (this.dueForEarlyRefresh(entry, policy, performance.now())) {
            // After this flight has ended, or refreshInBackground would see it and stand down.
            setImmediate(() => this.refreshInBackground(key, loader, policy, 'refresh', entry))
          }
          return { value: entry.value, outcome: 'hit', shareable: true }
        }
        if (!entry && found.state !== 'miss' && found.lock !== 'won' && mode === 'read') {
          mode = 'refresh' // corrupt data: take the lock to overwrite it
          continue
        }
        if (entry && (found.state === 'grace' || found.lock === 'backoff')) {
          if (found.lock === 'backoff') entry.backoffUntil = performance.now() + Number(found.lockArg)
          this.remember(key, entry)
          if (found.lock === 'won') {
            entry.refreshBlockedUntil = performance.now() + this.settings.lock.maxHold
            this.track(this.lead(key, loader, policy, claim, entry))
          }
          return this.stale(key, entry, found.lock === 'backoff' ? 'backoff' : 'grace')
        }
        if (found.lock === 'pass') return this.loadUncached(key, loader, policy)
        if (found.lock === 'error') return this.onLeaderMessage(key, found.data, loader, policy, fallback)!
        if (found.lock === 'won') {
          this.events.emit('miss', { key })
          return this.lead(key, loader, policy, claim, fallback)
        }

        // Another process holds the lock. Subscribe first, then re-check, so its
        // commit message cannot fall between our check and our subscription.
        if (!subscription) {
          this.events.emit('wait', { key })
          subscription = await this.notifier!.subscribe(keys.channel)
          waitDeadline = performance.now() + policy.waitTimeout
          continue
        }
        const left = waitDeadline - performance.now()
        if (left <= 0) return this.waitTimedOut(key, keys, owner, loader, policy, fallback)
        const message = await subscription.next(Math.min(Number(found.lockArg) + 1, poll, left))
        poll = Math.min(maxPollInterval, poll * 2) * (0.75 + Math.random() / 2)
        if (message === undefined) continue
        const outcome = this.onLeaderMessage(key, message, loader, policy, fallback)
        if (outcome) return outcome
      }
    } catch (error) {
      if (!(error instanceof RedisUnavailableError)) throw error
      return this.lead(key, loader, policy, undefined, fallback)
    } finally {
      subscription?.release()
    }
  }

  /** A background refresh: take the lock without waiting; someone else refreshing is fine. */
  private async refresh(key: string, loader: Loader<unknown>, policy: Policy, mode: LookupMode, current: Entry): Promise<Resolution<unknown>> {
    if (!this.store) return this.lead(key, loader, policy, undefined, current)
    const keys = entryKeys(this.settings.namespace, key)
    const owner = randomBytes(16).toString('hex')
    // Skip the reload if Redis already holds a value fresher than ours (another process refreshed).
    const refreshBelow = current.freshUntil - performance.now() + REFRESH_TOLERANCE_MS
    let found: Lookup
    try {
      found = await this.store.getOrLock(keys, owner, this.settings.lock.lease, mode, this.retentionMs, refreshBelow)
    } catch {
      return this.lead(key, loader, policy, undefined, current)
    }
    if (found.lock === 'won') return this.lead(key, loader, policy, { keys, token: found.lockArg, lockValue: `${owner}:${found.lockArg}` }, current)
    const newer = this.decode(key, found)
    const now = performance.now()
    if (newer && found.state === 'fresh') {
      this.remember(key, newer, now)
      return { value: newer.value, outcome: 'hit', shareable: true }
    }
    if (found.lock === 'held' || found.lock === 'backoff') current.refreshBlockedUntil = now + Number(found.lockArg)
    return { value: current.value, outcome: 'stale', shareable: true }
  }

  /** A message on the key's channel, from the leader in another process. */
  private onLeaderMessage(key: string, message: string, loader: Loader<unknown>, policy: Policy, fallback: Entry | undefined): Resolution<unknown> | Promise<Resolution<unknown>> | undefined {
    const kind = message[0]
    if (kind === 'c') {
      const entry = this.decodeCommitMessage(key, message)
      if (!entry) return undefined // re-check in Redis
      this.remember(key, entry)
      return { value: entry.value, outcome: 'coalesced', shareable: true }
    }
    if (kind === 'e') {
      const [, name = 'Error', ...rest] = message.split('|')
      const error = new RemoteLoaderError(key, name, rest.join('|'))
      if (fallbackValid(fallback, performance.now())) {
        this.events.emit('fail-safe', { key, error })
        return this.stale(key, fallback, 'fail-safe')
      }
      throw error
    }
    if (kind === 'u') return this.loadUncached(key, loader, policy)
    return undefined // 'r': the lock was released without a value; re-check
  }

  private async waitTimedOut(key: string, keys: EntryKeys, owner: string, loader: Loader<unknown>, policy: Policy, fallback: Entry | undefined): Promise<Resolution<unknown>> {
    this.events.emit('timeout', { key, kind: 'wait' })
    if (fallbackValid(fallback, performance.now())) return this.stale(key, fallback, 'wait-timeout')
    if (policy.onWaitTimeout === 'throw') throw new LockWaitTimeoutError(key, policy.waitTimeout)
    // Load without the lock; a fresh token still fences the result against newer ones.
    const found = await this.store!.getOrLock(keys, owner, this.settings.lock.lease, 'token', this.retentionMs)
    return this.lead(key, loader, policy, { keys, token: found.lockArg, lockValue: '' }, fallback)
  }

  // ── leading a load ────────────────────────────────────────────────────────

  /**
   * Runs the loader and stores its result: in Redis when `claim` is given (fenced
   * commit, lock released, waiters notified in the same script), else in L1 only.
   * Timeouts answer the callers early while the load goes on in the background.
   */
  private lead(key: string, loader: Loader<unknown>, policy: Policy, claim: Claim | undefined, fallback: Entry | undefined): Promise<Resolution<unknown>> {
    if (claim) this.events.emit('leader', { key })
    const lease = claim?.lockValue && this.store
      ? new Lease(this.store, claim.keys, claim.lockValue, this.settings.lock.lease, this.settings.lock.maxHold, key, (reason) => this.events.emit('lock-lost', { key, reason }))
      : undefined
    const context = new LoadContext(key, lease?.signal ?? NEVER_ABORTED, fallback?.value, policy)
    const startedAt = performance.now()
    const settled = (async () => {
      let value: unknown
      try {
        value = await loader(context)
      } catch (error) {
        await lease?.stop()
        this.events.emit('load', { key, durationMs: performance.now() - startedAt, error })
        return this.loadFailed(key, claim, error, fallback, policy)
      }
      await lease?.stop()
      const loadMs = performance.now() - startedAt
      this.events.emit('load', { key, durationMs: loadMs })
      return this.storeLoaded(key, claim, value, context, loadMs)
    })()
    this.track(settled)
    return this.withTimeouts(key, settled, policy, fallback)
  }

  /** Encodes and stores a loaded value; the callers get it whatever happens to the write. */
  private async storeLoaded(key: string, claim: Claim | undefined, value: unknown, context: LoadContext<unknown>, loadMs: number): Promise<Resolution<unknown>> {
    const loaded: Resolution<unknown> = { value, outcome: 'loaded', shareable: true }
    let data: string | undefined
    let reason = ''
    if (context.skip) {
      loaded.shareable = context.skip.share
      reason = 'the loader called doNotCache()'
    } else if (value === undefined) {
      reason = 'the loader returned undefined (return null to cache "nothing")'
    } else {
      try {
        data = this.settings.codec.encode(value)
      } catch (error) {
        reason = `the codec could not encode it: ${(error as Error)?.message}`
        this.events.emit('uncacheable', { key, reason, error: new SerializationError(key, reason, error) })
      }
    }
    if (data === undefined) {
      if (context.skip || value === undefined) this.events.emit('uncacheable', { key, reason })
      // Waiters elsewhere cannot receive this value: they run their own loaders.
      if (claim?.lockValue) await this.store?.release(claim.keys, claim.lockValue, 'u|', { passMs: context.skip?.passMs }).catch(() => {})
      return loaded
    }

    const life = context.lifetimes(loadMs)
    let written = true
    if (this.store) {
      try {
        written = await this.store.commit(claim?.keys ?? entryKeys(this.settings.namespace, key), { lockValue: claim?.lockValue ?? '', token: claim?.token ?? '', data, ...life })
        if (!written) this.events.emit('fenced', { key })
      } catch {
        // Redis is unavailable: keep the value in L1; the lock expires by itself.
      }
    }
    if (written) this.remember(key, entryFrom(value, life, performance.now()))
    return loaded
  }

  private async loadFailed(key: string, claim: Claim | undefined, error: unknown, fallback: Entry | undefined, policy: Policy): Promise<Resolution<unknown>> {
    const covered = fallbackValid(fallback, performance.now())
    if (claim?.lockValue) {
      const name = (error as Error)?.name ?? 'Error'
      const message = `e|${name}|${(error as Error)?.message ?? String(error)}`
      const marks = covered ? { backoffMs: policy.failSafeBackoff } : { negativeMs: policy.negativeTtl }
      await this.store?.release(claim.keys, claim.lockValue, message, marks).catch(() => {})
    }
    if (!covered) throw error
    fallback.backoffUntil = performance.now() + policy.failSafeBackoff
    this.events.emit('fail-safe', { key, error })
    return this.stale(key, fallback, 'fail-safe')
  }

  /** softTimeout serves the fallback, hardTimeout the fallback or a LoaderTimeoutError; the load goes on. */
  private withTimeouts(key: string, settled: Promise<Resolution<unknown>>, policy: Policy, fallback: Entry | undefined): Promise<Resolution<unknown>> {
    const hasFallback = fallbackValid(fallback, performance.now())
    const soft = hasFallback && policy.softTimeout > 0 ? policy.softTimeout : 0
    const hard = policy.hardTimeout
    if (!soft && !hard) return settled
    const timer = delay(soft && (!hard || soft < hard) ? soft : hard)
    const timedOut = timer.promise.then((): Resolution<unknown> => {
      const kind = soft && (!hard || soft < hard) ? 'soft' : 'hard'
      this.events.emit('timeout', { key, kind })
      if (hasFallback && fallbackValid(fallback, performance.now())) return this.stale(key, fallback, 'soft-timeout')
      throw new LoaderTimeoutError(key, hard)
    })
    settled.catch(() => {})
    return Promise.race([settled, timedOut]).finally(() => timer.cancel())
  }

  /** Runs a caller's own loader and stores nothing (hit-for-miss, or a leader's private result). */
  private async loadUncached<V>(key: string, loader: Loader<V>, policy: Policy): Promise<Resolution<V>> {
    const context = new LoadContext<V>(key, NEVER_ABORTED, undefined, policy)
    const startedAt = performance.now()
    try {
      const value = await loader(context)
      this.events.emit('load', { key, durationMs: performance.now() - startedAt })
      return { value, outcome: 'loaded', shareable: false }
    } catch (error) {
      this.events.emit('load', { key, durationMs: performance.now() - startedAt, error })
      throw error
    }
  }

  private stale<V>(key: string, entry: Entry<V>, reason: StaleReason): Resolution<V> {
    this.events.emit('stale', { key, reason })
    return { value: entry.value, outcome: 'stale', shareable: true }
  }

  // ── decoding ──────────────────────────────────────────────────────────────

  private decode(key: string, found: Lookup): Entry | undefined {
    if (found.corrupt) this.events.emit('corrupt', { key })
    if (found.data === '') return undefined
    return this.decodeData(key, found.data, found.life)
  }

  private decodeData(key: string, data: string, life: Lifetimes): Entry | undefined {
    try {
      return entryFrom(this.settings.codec.decode(data), life, performance.now())
    } catch (error) {
      this.events.emit('corrupt', { key, error })
      return undefined
    }
  }

  /** `c|fresh|grace|fallback|loadMs|data` as published by commit.lua. */
  private decodeCommitMessage(key: string, message: string): Entry | undefined {
    const fields: number[] = []
    let at = 2
    for (let i = 0; i < 4; i++) {
      const bar = message.indexOf('|', at)
      if (bar < 0) return undefined
      fields.push(Number(message.slice(at, bar)))
      at = bar + 1
    }
    const [freshMs = 0, graceMs = 0, fallbackMs = 0, loadMs = 0] = fields
    return this.decodeData(key, message.slice(at), { freshMs, graceMs, fallbackMs, loadMs })
  }
}

/** Creates a cache. Without `redis` it runs in-process (L1 + single-flight). */
export function createCache(options: CacheOptions): Cache {
  return new Cache(options)
}
