import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import { LoadContext, type Loader } from './context.js'
import { decodeValue, encodeValue, entryFrom, fallbackValid, type Entry, type EntryOrigin, type Lifetimes } from './entry.js'
import { Deadlines } from './deadlines.js'
import { checkKey } from './key.js'
import { decodeFailure, describeFailure, encodeFailure } from './loader-error.js'
import { CacheClosedError, InvalidArgumentError, LoaderTimeoutError, LockWaitTimeoutError, RedisUnavailableError, RemoteLoaderError, SerializationError, ValueTooLargeError } from './errors.js'
import { CacheEmitter, type CacheEventName, type CacheEvents, type CacheStats, type StaleReason, type WaitOutcome } from './events.js'
import { MemoryTier } from './memory/l1.js'
import { SingleFlight, type Flight } from './memory/single-flight.js'
import { LOAD_SCOPE, type LoadScope } from './observability/load-scope.js'
import { resolveCallPolicy, resolveSettings, type CacheOptions, type Policy, type PolicyOptions, type Settings } from './options.js'
import { CircuitBreaker } from './redis/breaker.js'
import { entryKeys, invalidationChannel, type EntryKeys } from './redis/keys.js'
import { Lease } from './redis/lease.js'
import { Notifier, type Subscription } from './redis/notifier.js'
import { newerVersion, parseRecord } from './redis/record.js'
import { ServerProbe } from './redis/server-probe.js'
import { FOREIGN_TYPE, RedisStore, type Broadcast, type Lookup, type LookupMode } from './redis/store.js'
import { withTimeout } from './timers.js'

/**
 * How a caller's value was obtained:
 * - `hit`: fresh, from L1 or Redis;
 * - `stale`: a stale value (grace, fail-safe, backoff, or a soft, hard or wait timeout);
 * - `loaded`: this caller's own loader produced it;
 * - `coalesced`: another caller's loader produced it (in this process or another).
 */
export type LoadOutcome = 'hit' | 'stale' | 'loaded' | 'coalesced'

export interface LoadResult<V> {
  value: V
  outcome: LoadOutcome
}

/** What one flight resolves to. `shareable: false` means its followers must run their own loaders. */
interface Resolution<V = unknown> extends LoadResult<V> {
  shareable: boolean
}

/** One request as it goes through the state machine. */
interface Call {
  key: string
  loader: Loader<unknown>
  policy: Policy
  /** `deletions` when the call started: a delete after it keeps its result out of L1. */
  epoch: number
  /** A refresh nobody waits for (grace, early refresh). */
  background?: boolean
}

/** What a flight has learned that its callers' timeouts can use. */
interface FlightNotes {
  fallback: Entry | undefined
  /** While the flight's first Redis lookup is pending: what its joined callers' waitTimeouts do when it answers. */
  lookingUp?: (() => void)[] | false
  /** Its callers' softTimeout / hardTimeout / waitTimeout, on one timer (created on first need). */
  deadlines?: Deadlines
}

/** A lock (or a bare fencing token) this process holds for one load. */
interface Claim {
  keys: EntryKeys
  token: string
  /** '' when loading without the lock (after a wait timeout): nothing to renew or release. */
  lockValue: string
  /** `performance.now()` when the lookup that took the lock was sent: the lease runs from no earlier. */
  lockedAt: number
}

/** The flight's first lookup answered (or failed): from now on its joined callers' waitTimeouts run. */
function lookedUp(notes: FlightNotes): void {
  const postponed = notes.lookingUp
  notes.lookingUp = false
  if (postponed) for (const resume of postponed) resume()
}

const NEVER_ABORTED = new AbortController().signal
/** Tells a caller to run its own loader, storing nothing. */
const OWN_LOAD: Resolution = { value: undefined, outcome: 'loaded', shareable: false }
/** Slack for the round trip between reading an entry's remaining life and asking Redis. */
const REFRESH_TOLERANCE_MS = 50
/** How a cross-process wait ended, by what the re-check found once the lock was no longer held. */
const WAIT_ENDED_BY_LOOKUP: Record<Exclude<Lookup['lock'], 'held'>, WaitOutcome> = {
  none: 'value', error: 'error', backoff: 'error', won: 'released', pass: 'released', token: 'released',
}
/** How a cross-process wait ended, by the leader's message that answered it (commit, error, not cacheable). */
const WAIT_ENDED_BY_MESSAGE: Record<string, WaitOutcome> = { c: 'value', n: 'value', e: 'error', u: 'released' }
/** A channel message's kind, its first byte: 'c' commit, 'e' loader error, 'u' uncacheable (messages are Buffers). */
const messageKind = (message: Buffer): string => String.fromCharCode(message[0] ?? 0)
/** Bound on remembered refresh holds; pruned of expired ones past it. */
const MAX_REFRESH_HOLDS = 10_000

/**
 * The cache. Every `getOrLoad` walks one state machine:
 *
 *   L1 fresh → return (no await)        L1 in grace → return stale, refresh in background
 *   else, once per key per process (single-flight), `resolve()` asks Redis in ONE script:
 *     fresh → return                    grace → return stale (+ refresh if we won the lock)
 *     lock won → `lead()`               lock held → subscribe, re-check, wait for the commit message
 *     backoff → return stale            pass (hit-for-miss) → run own loader, store nothing
 *     error (negative caching) → the recent error, or stale
 *     Redis unavailable → `lead()` in-process only
 *   Each caller's softTimeout / hardTimeout race the flight; the flight itself runs on.
 */
export class Cache {
  /** Wraps each loader call while `instrument()` traces this cache. */
  [LOAD_SCOPE]: LoadScope | undefined
  private readonly settings: Settings
  private readonly events = new CacheEmitter()
  private readonly memory: MemoryTier | undefined
  private readonly flights = new SingleFlight<Resolution, FlightNotes>()
  private readonly background = new Set<Promise<unknown>>()
  /** Background refreshes running now (grace and early refresh), capped by `maxBackgroundRefreshes`. */
  private refreshing = 0
  /** Key → local time until which no early or background refresh is tried (one is under way elsewhere). */
  private readonly refreshHolds = new Map<string, number>()
  /** Keys whose reload in another process this one is listening for (see watchReload). */
  private readonly watching = new Map<string, { forgotten: boolean }>()
  /** Key → grace refreshes running outside the flight map (see leadInBackground). */
  private readonly backgroundLeads = new Map<string, number>()
  /** Keys whose leader's commit is being retried through a failover (at most one lease each). */
  private readonly committing = new Set<string>()
  /** Key → value of `deletions` when it was deleted while a flight for it was running. */
  private readonly deletedAt = new Map<string, number>()
  private deletions = 0
  private readonly store: RedisStore | undefined
  private readonly notifier: Notifier | undefined
  private readonly probe: ServerProbe | undefined
  /** How long a delete's fence outlives it: the longest a load may still commit. */
  private readonly retentionMs: number
  private closed = false
  private readonly setUp: Promise<void> = Promise.resolve()
  /** Tags this cache's invalidation broadcasts, so it does not act on its own. */
  private readonly id = randomBytes(8).toString('hex')

  constructor(options: CacheOptions) {
    this.settings = resolveSettings(options)
    const { l1, lock, redisTimeout, redisFailoverWait, breaker, namespace } = this.settings
    this.retentionMs = lock.maxHold + lock.lease
    if (l1) this.memory = new MemoryTier(l1.max, l1.maxBytes, l1.maxTtl)
    if (options.redis) {
      const client: Redis | Cluster = options.redis
      if (typeof client.defineCommand !== 'function' || typeof client.duplicate !== 'function') {
        throw new InvalidArgumentError('redis', 'must be an ioredis Redis or Cluster client')
      }
      this.probe = new ServerProbe(client, this.settings.shardedPubSub, redisTimeout, this.events)
      const circuit = new CircuitBreaker(breaker.threshold, breaker.openFor, this.events)
      this.store = new RedisStore(client, redisTimeout, circuit, this.events, this.probe, redisFailoverWait, lock.waitForReplicas, this.settings.redisCommands)
      this.notifier = new Notifier(client, redisTimeout, this.probe)
      this.notifier.onLoss((phase) => {
        // Invalidations published meanwhile are gone: what L1 holds is checked with Redis before it is served again.
        this.memory?.suspectAll(performance.now())
        if (phase === 'lost') this.events.emit('redis-error', { operation: 'subscriber', error: new RedisUnavailableError('subscriber connection lost: waiters poll until it is back') })
      })
      if (this.memory) {
        this.notifier.listen(invalidationChannel(namespace), (message) => {
          const bar = message.indexOf('|')
          if (message.slice(0, bar) !== this.id) this.forget(message.slice(bar + 1)) // our own deletes are done already
        })
      }
      // In the background, so the first burst of a fresh process does not wait on it.
      this.setUp = Promise.all([this.store.warmUp(), this.notifier.warmUp()]).then(() => {})
    } else if (this.settings.policy.negativeTtl > 0) {
      throw new InvalidArgumentError('negativeTtl', 'needs Redis: it shares a failure across processes')
    } else if (!this.memory) {
      throw new InvalidArgumentError('l1', 'cannot be false without redis: nothing would be cached')
    }
  }

  // ── public API ────────────────────────────────────────────────────────────

  /**
   * The value for `key`: from L1, from Redis, from another process's load, or from
   * `loader` if this caller is elected to run it. Resolves with no await on an L1 hit.
   */
  getOrLoad<V>(key: string, loader: Loader<V>, options?: PolicyOptions): Promise<V> {
    const answer = this.lookup(key, loader, options)
    return answer instanceof Promise ? answer.then((resolution) => resolution.value as V) : Promise.resolve(answer.value as V)
  }

  /** As `getOrLoad`, and also says how the value was obtained (the middleware's `X-Cache`). */
  async getOrLoadResult<V>(key: string, loader: Loader<V>, options?: PolicyOptions): Promise<LoadResult<V>> {
    const { value, outcome } = await this.lookup(key, loader, options)
    return { value: value as V, outcome }
  }

  /**
   * Stores `value` as a fresh load would, fenced: it supersedes every load in flight, and
   * other processes drop their L1 copy. Rejects on `undefined`, on a value the codec cannot
   * encode (`SerializationError`), on one above `maxValueBytes` (`ValueTooLargeError`) and
   * when Redis is unavailable (`RedisUnavailableError`).
   */
  async set<V>(key: string, value: V, options?: PolicyOptions): Promise<void> {
    const call = this.call(key, () => value, options)
    if (value === undefined) throw new InvalidArgumentError('value', 'undefined cannot be stored; use null for "nothing"')
    const data = this.encode(key, value)
    this.forget(key)
    const epoch = this.deletions // a delete() while we write must win over this value in L1
    const life = this.jittered(new LoadContext(key, NEVER_ABORTED, undefined, call.policy).lifetimes(0))
    let version: string | undefined
    if (this.store) {
      version = await this.store.commit(entryKeys(this.settings.namespace, key), { lockValue: '', token: '', data, ...life }, this.forgetMessage(key))
      if (version === undefined) return
    }
    if (this.deletions === epoch) this.remember({ ...call, epoch }, entryFrom(value, life, performance.now(), { version, size: data.length }))
  }

  /**
   * Removes `key` everywhere: this process's L1, Redis, and (over pub/sub) every other
   * process's L1. A load that began before this call cannot store its result after it.
   * Rejects with `RedisUnavailableError` if Redis could not be told.
   */
  async delete(key: string): Promise<void> {
    this.call(key, () => undefined, undefined)
    this.forget(key)
    if (!this.store) return
    // Other processes may hold it in L1 even if this one has none: the script tells them.
    await this.store.invalidate(entryKeys(this.settings.namespace, key), this.retentionMs, this.forgetMessage(key))
  }

  /**
   * Resolves once the set-up that `createCache` started in the background is done: the
   * subscriber connection is open, the scripts are loaded and the server clock is known.
   * Optional: a server may await it before it listens, so its first burst pays none of it.
   * Never rejects, and resolves within about `redisTimeout` even when Redis is down.
   */
  ready(): Promise<void> {
    return this.setUp
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
   * Stops accepting calls, waits for loads and background refreshes in flight (each is
   * bounded by `lock.maxHold`), then closes the subscriber connection. The Redis client
   * you passed in stays open.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    while (this.background.size > 0) await Promise.allSettled([...this.background])
    this.store?.close()
    this.probe?.close()
    this.notifier?.close()
    this.memory?.clear()
    this.events.removeAll()
  }

  // ── L1 and single-flight ──────────────────────────────────────────────────

  private call(key: string, loader: unknown, options: PolicyOptions | undefined): Call {
    if (this.closed) throw new CacheClosedError()
    checkKey(key, this.settings.maxKeyLength)
    if (typeof loader !== 'function') throw new InvalidArgumentError('loader', `must be a function, got ${typeof loader}`)
    const policy = options === undefined ? this.settings.policy : resolveCallPolicy(this.settings.policy, options)
    return { key, loader: loader as Loader<unknown>, policy, epoch: this.deletions }
  }

  /** A resolution straight from L1 (synchronous), or the flight's promise. */
  private lookup(key: string, loader: unknown, options: PolicyOptions | undefined): Resolution | Promise<Resolution> {
    let call: Call
    try {
      call = this.call(key, loader, options)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.serveFromMemory(call) ?? this.fly(call)
  }

  private serveFromMemory(call: Call): Resolution | undefined {
    const entry = this.memory?.get(call.key)
    if (!entry) return undefined
    const now = performance.now()
    if (now < entry.freshUntil) {
      if (this.dueForEarlyRefresh(call, entry, now)) this.refreshInBackground(call, 'refresh', entry)
      this.events.emit('hit', { key: call.key, tier: 'l1' })
      return { value: entry.value, outcome: 'hit', shareable: true }
    }
    if (now < entry.backoffUntil && now < entry.fallbackUntil) return this.stale(call.key, entry, 'backoff')
    if (now < entry.graceUntil) {
      this.refreshInBackground(call, 'read', entry)
      return this.stale(call.key, entry, 'grace')
    }
    return undefined
  }

  private dueForEarlyRefresh(call: Call, entry: Entry, now: number): boolean {
    const rule = call.policy.earlyRefresh
    if (rule.kind === 'off' || now < (this.refreshHolds.get(call.key) ?? 0)) return false
    const remaining = entry.freshUntil - now
    if (rule.kind === 'threshold') return remaining <= entry.ttlMs * (1 - rule.fraction)
    // XFetch: refresh when now − δ·β·ln(rand) ≥ expiry.
    return -entry.loadMs * rule.beta * Math.log(Math.random()) >= remaining
  }

  private holdRefresh(key: string, until: number): void {
    if (this.refreshHolds.size >= MAX_REFRESH_HOLDS) {
      const now = performance.now()
      for (const [held, expiry] of this.refreshHolds) if (expiry <= now) this.refreshHolds.delete(held)
      if (this.refreshHolds.size >= MAX_REFRESH_HOLDS) this.refreshHolds.clear()
    }
    this.refreshHolds.set(key, until)
  }

  private remember(call: Call, entry: Entry): void {
    if ((this.deletedAt.get(call.key) ?? -1) > call.epoch) return // deleted since this call began
    this.memory?.set(call.key, entry, performance.now())
  }

  /** Drops `key` from L1; a flight already running keeps its callers but cannot fill L1 or gain new callers. */
  private forget(key: string): void {
    this.memory?.delete(key)
    this.refreshHolds.delete(key)
    const watch = this.watching.get(key)
    if (watch) watch.forgotten = true
    this.deletions++
    if (this.busy(key)) {
      this.deletedAt.set(key, this.deletions)
      this.flights.detach(key)
    }
  }

  /** The invalidation that delete() and set() publish with their write. */
  private forgetMessage(key: string): Broadcast {
    return { channel: invalidationChannel(this.settings.namespace), message: `${this.id}|${key}` }
  }

  private fly(call: Call): Promise<Resolution> {
    const startedAt = performance.now()
    const { flight, joined } = this.flights.run(call.key, { fallback: undefined }, (notes) => this.resolve(call, notes))
    if (joined) this.events.emit('coalesced', { key: call.key, from: 'process' })
    const answered = this.withTimeouts(call, flight, joined)
    if (!joined) {
      this.trackFlight(call.key, flight.promise)
      return answered
    }
    return answered.then((resolution) => {
      if (!resolution.shareable) return this.loadUncached(call, startedAt)
      return resolution.outcome === 'loaded' ? { ...resolution, outcome: 'coalesced' } : resolution
    })
  }

  /** Tracks a flight for close(), and forgets its key's delete marker once no flight needs it. */
  private trackFlight(key: string, flight: Promise<unknown>): void {
    this.track(flight, () => {
      if (!this.busy(key)) this.deletedAt.delete(key)
    })
  }

  /**
   * This caller's softTimeout and hardTimeout, raced against the flight (leading or
   * waiting alike), and for a caller that joined another caller's flight, waitTimeout.
   * The flight runs on, so a process still loads each key once.
   */
  private withTimeouts(call: Call, flight: Flight<Resolution, FlightNotes>, joined: boolean): Promise<Resolution> {
    const { key, policy } = call
    const fallback = () => (fallbackValid(flight.notes.fallback, performance.now()) ? flight.notes.fallback : undefined)
    // Each deadline answers, throws, or returns undefined to keep waiting (`again(ms)`: come back later).
    const deadlines: [number, (again: (ms: number) => void) => Resolution | Promise<Resolution> | undefined][] = []
    if (policy.softTimeout) {
      deadlines.push([policy.softTimeout, () => {
        const stale = fallback()
        if (!stale) return undefined // nothing to answer with yet
        this.events.emit('timeout', { key, kind: 'soft' })
        return this.stale(key, stale, 'soft-timeout')
      }])
    }
    if (joined) {
      deadlines.push([policy.waitTimeout, (again) => {
        // A flight still on its first Redis lookup (queued behind a burst, or sent) is not yet
        // waiting for anyone's load: count the wait again from when the lookup answers.
        const lookup = flight.notes.lookingUp
        if (lookup) return void lookup.push(() => again(policy.waitTimeout))
        // Run our own loader (fly() does, on this unshared marker); the flight still stores its result.
        return this.waitTimedOut(call, fallback()) ?? OWN_LOAD
      }])
    }
    if (policy.hardTimeout) {
      deadlines.push([policy.hardTimeout, () => {
        this.events.emit('timeout', { key, kind: 'hard' })
        const stale = fallback()
        if (stale) return this.stale(key, stale, 'hard-timeout')
        throw new LoaderTimeoutError(key, policy.hardTimeout)
      }])
    }
    if (deadlines.length === 0) return flight.promise
    const schedule = this.deadlinesOf(flight)
    return new Promise<Resolution>((resolve, reject) => {
      let done = false
      const settle = (answer: () => void) => {
        if (done) return
        done = true
        answer()
      }
      const now = performance.now()
      for (const [ms, onDeadline] of deadlines) {
        const fire = () => {
          if (done) return // answered already; the entry just comes due
          try {
            const answer = onDeadline((later) => schedule.add(performance.now() + later, fire))
            if (answer) settle(() => resolve(answer))
          } catch (error) {
            settle(() => reject(error))
          }
        }
        schedule.add(now + ms, fire)
      }
      flight.promise.then((resolution) => settle(() => resolve(resolution)), (error: unknown) => settle(() => reject(error)))
    })
  }

  /** The flight's one timer for all its callers' deadlines, dropped when the flight settles. */
  private deadlinesOf(flight: Flight<Resolution, FlightNotes>): Deadlines {
    if (!flight.notes.deadlines) {
      const schedule = (flight.notes.deadlines = new Deadlines())
      flight.promise.then(() => schedule.clear(), () => schedule.clear())
    }
    return flight.notes.deadlines
  }


  private refreshInBackground(call: Call, mode: LookupMode, current: Entry): void {
    const now = performance.now()
    if (this.closed || now < (this.refreshHolds.get(call.key) ?? 0) || this.flights.has(call.key)) return
    if (this.refreshing >= this.settings.maxBackgroundRefreshes) return // the value in hand is served; a later read retries
    this.holdRefresh(call.key, now + this.settings.lock.lease)
    const refresh = { ...call, background: true }
    const { flight } = this.flights.run(call.key, { fallback: current }, () => this.refresh(refresh, mode, current))
    this.trackFlight(call.key, this.countRefresh(flight.promise))
  }

  /** Counts a background refresh while it runs, for the `maxBackgroundRefreshes` cap. */
  private countRefresh<T>(refresh: Promise<T>): Promise<T> {
    this.refreshing++
    refresh.then(() => this.refreshing--, () => this.refreshing--)
    return refresh
  }

  /** A stored ttl, shortened by up to `ttlJitter` so that keys loaded together expire apart. */
  private jittered(life: Lifetimes): Lifetimes {
    const { ttlJitter } = this.settings
    if (ttlJitter === 0) return life
    return { ...life, freshMs: Math.max(1, Math.round(life.freshMs * (1 - ttlJitter * Math.random()))) }
  }

  /** Is any load for `key` running in this process: a flight, or a grace refresh outside the map? */
  private busy(key: string): boolean {
    return this.flights.busy(key) || this.backgroundLeads.has(key)
  }

  /**
   * A grace refresh this process won the lock for, run after its flight answered stale.
   * Counted in `backgroundLeads` so that a delete() or set() meanwhile leaves a delete
   * marker, and the refresh cannot put the old value back into L1.
   */
  private leadInBackground(call: Call, claim: Claim, notes: FlightNotes): void {
    const { key } = call
    this.backgroundLeads.set(key, (this.backgroundLeads.get(key) ?? 0) + 1)
    this.trackFlight(key, this.countRefresh(this.lead(call, claim, notes)).finally(() => {
      const left = (this.backgroundLeads.get(key) ?? 1) - 1
      if (left > 0) this.backgroundLeads.set(key, left)
      else this.backgroundLeads.delete(key)
    }))
  }

  /** Keeps `work` for close() to wait on until it settles (one reaction: this is on every call's path). */
  private track(work: Promise<unknown>, then?: () => void): void {
    this.background.add(work)
    const done = () => {
      this.background.delete(work)
      then?.()
    }
    work.then(done, done)
  }

  // ── the Redis state machine ───────────────────────────────────────────────

  /** One flight: decide from Redis who loads, then lead, wait, or serve. */
  private async resolve(call: Call, notes: FlightNotes): Promise<Resolution> {
    const { key } = call
    const inMemory = this.memory?.get(key)
    if (fallbackValid(inMemory, performance.now())) notes.fallback = inMemory
    if (!this.store) {
      this.events.emit('miss', { key }) // in-process mode: L1 was the only tier
      return this.lead(call, undefined, notes)
    }

    const keys = entryKeys(this.settings.namespace, key)
    const store = this.store
    let waitingSince: number | undefined // set from the `wait` event until the `waited` one
    const waited = (outcome: WaitOutcome) => {
      if (waitingSince === undefined) return
      this.events.emit('waited', { key, durationMs: performance.now() - waitingSince, outcome })
      waitingSince = undefined
    }
    let handedOff = false // past this point a RedisUnavailableError is the loader's own
    let subscription: Subscription | undefined
    let owner = '' // set after the fresh read: a hit needs none
    // A lookup of `owner` got no answer: it may take the lock yet. Undone once the flight is done with `owner`.
    let abandoned = false
    let won = false
    // This process's last load of the key is still trying to commit: the failover is waited out for it, as a waiter would.
    const committing = this.committing.has(key)
    const failoverDeadline = performance.now() + call.policy.waitTimeout
    const { lease, pollInterval, maxPollInterval } = this.settings.lock
    try {
      // Whichever command goes first is sent before this returns, so calls keep their order.
      if (store.clock.stale()) void store.syncClock()
      // The first lookup is the fresh GET and, when it finds nothing, the script: joined
      // callers' waitTimeouts start once it answers (see withTimeouts).
      notes.lookingUp ??= []
      // Through a failover as the script is (redisFailoverWait): else every process would load.
      const fresh = store.clock.now() === undefined
        ? undefined
        : await store.throughFailover(() => this.readFresh(key, keys, store), failoverDeadline, pollInterval, { key: keys.entry, patient: committing }).catch((error: unknown) => {
          lookedUp(notes)
          throw error
        })
      if (fresh) return this.hit(call, fresh)
      owner = randomBytes(16).toString('hex')
      let mode: LookupMode = 'read'
      let waitDeadline = 0
      let poll = pollInterval
      for (;;) {
        notes.lookingUp ??= []
        // The lease runs from the attempt that took the lock, not from the first of a failover's retries.
        let sentAt = performance.now()
        // A waiter's re-check (waitDeadline set) retries until its wait ends, not just redisFailoverWait.
        const found = await store.throughFailover(() => ((sentAt = performance.now()), store.getOrLock(keys, owner, lease, mode, this.retentionMs, -1, () => (abandoned = true))), waitDeadline || failoverDeadline, pollInterval, { key: keys.entry, patient: committing || waitDeadline > 0 }).finally(() => lookedUp(notes))
        const entry = this.decode(key, found)
        if (entry) notes.fallback = entry
        if (found.lock !== 'held') waited(WAIT_ENDED_BY_LOOKUP[found.lock])
        switch (found.lock) {
          case 'none': // fresh
            if (!entry) {
              mode = 'refresh' // corrupt data: take the lock and overwrite it
              continue
            }
            return this.hit(call, entry)
          case 'backoff':
            if (!entry) return this.loadUncached(call)
            entry.backoffUntil = performance.now() + Number(found.lockArg)
            this.remember(call, entry)
            return this.stale(key, entry, 'backoff')
          case 'pass':
            return this.loadUncached(call)
          case 'error':
            return this.remoteFailure(call, found.data.toString(), notes.fallback)
          case 'token':
            throw new Error(`unexpected lookup ${found.lock} in mode ${mode}`)
          case 'won': {
            won = true // the lock is the lead's to commit or release
            this.checkReplicated(key, found)
            const claim: Claim = { keys, token: found.lockArg, lockValue: `${owner}:${found.lockArg}`, lockedAt: sentAt }
            if (entry && found.state === 'grace') {
              this.remember(call, entry)
              if (this.refreshing >= this.settings.maxBackgroundRefreshes) {
                // Too many refreshes running here: give the lock back (waiters re-check) and serve stale.
                await this.store.release(keys, claim.lockValue, 'r|').catch(() => {})
                return this.stale(key, entry, 'grace')
              }
              this.holdRefresh(key, performance.now() + lease) // we are the one refreshing it
              this.leadInBackground({ ...call, background: true }, claim, { fallback: entry })
              return this.stale(key, entry, 'grace')
            }
            this.events.emit('miss', { key })
            handedOff = true
            return await this.lead(call, claim, notes)
          }
          case 'held': {
            const pttl = Number(found.lockArg)
            if (entry && found.state === 'grace') {
              waited('value')
              this.remember(call, entry)
              this.watchReload(call, keys, entry, pttl) // another process is refreshing it
              return this.stale(key, entry, 'grace')
            }
            // Subscribe first, then re-check, so the leader's commit message cannot
            // fall between our check and our subscription.
            if (!subscription) {
              this.events.emit('wait', { key })
              waitingSince = performance.now()
              subscription = await store.throughFailover(() => this.notifier!.subscribe(keys.channel), failoverDeadline, pollInterval, { key: keys.entry, patient: true })
              waitDeadline = performance.now() + call.policy.waitTimeout
              continue
            }
            const left = waitDeadline - performance.now()
            if (left <= 0) {
              waited('timeout')
              const timedOut = this.waitTimedOut(call, notes.fallback)
              if (timedOut) return timedOut
              // Load without the lock; a fresh token still fences the result against newer ones.
              const { lockArg: token } = await this.store.getOrLock(keys, owner, lease, 'token', this.retentionMs)
              handedOff = true
              return await this.lead(call, { keys, token, lockValue: '', lockedAt: 0 }, notes)
            }
            const message = await subscription.next(Math.min(pttl + 1, poll, left))
            poll = Math.min(maxPollInterval, poll * 2) * (0.75 + Math.random() / 2)
            const answer = message === undefined ? undefined : await this.onLeaderMessage(call, keys, message, notes.fallback)
            if (answer) {
              waited(WAIT_ENDED_BY_MESSAGE[messageKind(message!)] ?? 'released')
              return answer
            }
            continue // no news, or the lock was released without a value: re-check
          }
        }
      }
    } catch (error) {
      waited(error instanceof RemoteLoaderError ? 'error' : 'failed')
      if (handedOff || !(error instanceof RedisUnavailableError)) throw error
      // An L1 entry waiting to be checked (see suspectAll) serves on, as it did before Redis failed.
      const served = this.memory?.trustAgain(key) && this.serveFromMemory(call)
      if (served) return served
      return this.lead(call, undefined, notes)
    } finally {
      subscription?.release()
      if (abandoned && !won) store.releaseAbandoned(keys, owner)
    }
  }

  /** With lock.waitForReplicas: a lock fewer replicas acknowledged is used all the same (the weaker mode), and reported. */
  private checkReplicated(key: string, found: Lookup): void {
    const wanted = this.settings.lock.waitForReplicas?.replicas
    if (wanted !== undefined && found.acknowledged !== undefined && found.acknowledged < wanted) {
      this.events.emit('lock-unreplicated', { key, acknowledged: found.acknowledged, wanted })
    }
  }

  private hit(call: Call, entry: Entry): Resolution {
    this.remember(call, entry)
    this.events.emit('hit', { key: call.key, tier: 'redis' })
    if (this.dueForEarlyRefresh(call, entry, performance.now())) {
      // After this flight has ended, or refreshInBackground would see it and stand down.
      setImmediate(() => {
        if (this.deletions === call.epoch) this.refreshInBackground(call, 'refresh', entry) // not after a delete
      })
    }
    return { value: entry.value, outcome: 'hit', shareable: true }
  }

  /** A background refresh: take the lock without waiting; someone else refreshing is fine. */
  private async refresh(call: Call, mode: LookupMode, current: Entry): Promise<Resolution> {
    const notes = { fallback: current }
    if (!this.store) return this.lead(call, undefined, notes)
    const keys = entryKeys(this.settings.namespace, call.key)
    const owner = randomBytes(16).toString('hex')
    // Skip the reload if Redis already holds a value fresher than ours (another process refreshed).
    const refreshBelow = current.freshUntil - performance.now() + REFRESH_TOLERANCE_MS
    let found: Lookup
    const sentAt = performance.now()
    try {
      found = await this.store.getOrLock(keys, owner, this.settings.lock.lease, mode, this.retentionMs, refreshBelow)
    } catch {
      // Redis is unreachable, so every process would refresh on its own: while our copy may
      // still be served (fresh or in grace), keep serving it and spare the database that herd.
      const now = performance.now()
      if (now < current.graceUntil || now < current.freshUntil) {
        this.holdRefresh(call.key, now + this.settings.breaker.openFor)
        return { value: current.value, outcome: now < current.freshUntil ? 'hit' : 'stale', shareable: true }
      }
      return this.lead(call, undefined, notes)
    }
    const stored = this.decode(call.key, found)
    if (stored && found.state === 'fresh' && found.lock !== 'won') {
      this.remember(call, stored)
      if (found.lock === 'held') this.watchReload(call, keys, stored, Number(found.lockArg)) // an early refresh elsewhere
      else this.refreshHolds.delete(call.key)
      return { value: stored.value, outcome: 'hit', shareable: true }
    }
    // Redis holds a newer value than ours, though already in grace itself: serve that one.
    if (stored && newerVersion(stored.version, current.version)) {
      this.remember(call, stored)
      current = stored
      notes.fallback = stored
    }
    if (found.lock === 'won') {
      this.checkReplicated(call.key, found)
      return this.lead(call, { keys, token: found.lockArg, lockValue: `${owner}:${found.lockArg}`, lockedAt: sentAt }, notes)
    }
    const now = performance.now()
    if (found.lock === 'held') this.watchReload(call, keys, current, Number(found.lockArg))
    else if (found.lock === 'backoff') this.holdRefresh(call.key, now + Number(found.lockArg))
    if (now < current.freshUntil) return { value: current.value, outcome: 'hit', shareable: true }
    if (now < current.graceUntil) return { value: current.value, outcome: 'stale', shareable: true }
    // Our copy left its grace while we asked: callers that joined this flight must not get
    // it, so the flight carries on as a foreground one (wait for the other process's value).
    return this.resolve({ ...call, background: false }, notes)
  }

  /**
   * Another process holds the lock and reloads the key while this one serves `current`
   * (stale, or soon stale): listen on the key's channel and adopt the committed value from
   * its message. No refresh is tried meanwhile, but only for a delay derived from the
   * entry's measured load time (and how long the lock has been held), never a whole lease:
   * then the next call re-checks Redis, so a lost message costs about one load time.
   */
  private watchReload(call: Call, keys: EntryKeys, current: Entry, lockPttl: number): void {
    const { lease, pollInterval, maxPollInterval } = this.settings.lock
    const heldFor = Math.max(0, lease - lockPttl)
    const waitMs = Math.min(lockPttl + 1, maxPollInterval, Math.max(pollInterval, 2 * current.loadMs, heldFor))
    const until = performance.now() + waitMs
    this.holdRefresh(call.key, until)
    if (this.watching.has(call.key) || !this.notifier || this.closed) return
    const watch = { forgotten: false } // set by a delete() or set() meanwhile: then adopt nothing
    this.watching.set(call.key, watch)
    this.track((async () => {
      let subscription: Subscription | undefined
      try {
        subscription = await this.notifier!.subscribe(keys.channel)
        // A commit that landed before the subscription: its fresh copy is there (one GET).
        let entry = this.store && this.store.clock.now() !== undefined ? await this.readFresh(call.key, keys, this.store) : undefined
        if (!entry || !newerVersion(entry.version, current.version)) {
          const message = await subscription.next(until - performance.now())
          entry = message ? await this.committedEntry(call.key, keys, message) : undefined
        }
        if (entry && !watch.forgotten && newerVersion(entry.version, current.version)) this.remember(call, entry)
      } catch {
        // Redis unavailable: the hold runs out and the next call re-checks.
      } finally {
        subscription?.release()
        this.watching.delete(call.key)
        if (this.refreshHolds.get(call.key) === until) this.refreshHolds.delete(call.key)
      }
    })())
  }

  /** A message on the key's channel, from the leader in another process; undefined = re-check. */
  private async onLeaderMessage(call: Call, keys: EntryKeys, message: Buffer, fallback: Entry | undefined): Promise<Resolution | undefined> {
    switch (messageKind(message)) {
      case 'c':
      case 'n': {
        const entry = await this.committedEntry(call.key, keys, message)
        if (!entry) return undefined
        this.remember(call, entry)
        this.events.emit('coalesced', { key: call.key, from: 'remote' })
        return { value: entry.value, outcome: 'coalesced', shareable: true }
      }
      case 'e':
        return this.remoteFailure(call, message.toString(), fallback)
      case 'u':
        return this.loadUncached(call)
      default:
        return undefined
    }
  }

  /** The value a commit message announces: carried in it ('c'), or read with one GET (a notice, 'n', for a large value). */
  private async committedEntry(key: string, keys: EntryKeys, message: Buffer): Promise<Entry | undefined> {
    switch (messageKind(message)) {
      case 'c':
        return this.decodeCommitMessage(key, message)
      case 'n':
        return this.store && this.store.clock.now() !== undefined ? this.readFresh(key, keys, this.store) : undefined
      default:
        return undefined
    }
  }

  /** `e|…` (see loader-error.ts): a load failed elsewhere. Stale if covered, else the error. */
  private remoteFailure(call: Call, message: string, fallback: Entry | undefined): Resolution {
    const { name, message: remoteMessage } = decodeFailure(message)
    const error = new RemoteLoaderError(call.key, name, remoteMessage)
    if (!fallbackValid(fallback, performance.now())) throw error
    this.events.emit('fail-safe', { key: call.key, error })
    return this.stale(call.key, fallback, 'fail-safe')
  }

  /** After waitTimeout: stale if we can, a LockWaitTimeoutError if asked, else undefined (load it ourselves). */
  private waitTimedOut(call: Call, fallback: Entry | undefined): Resolution | undefined {
    this.events.emit('timeout', { key: call.key, kind: 'wait' })
    if (fallbackValid(fallback, performance.now())) return this.stale(call.key, fallback, 'wait-timeout')
    if (call.policy.onWaitTimeout === 'throw') throw new LockWaitTimeoutError(call.key, call.policy.waitTimeout)
    return undefined
  }

  // ── leading a load ────────────────────────────────────────────────────────

  /**
   * Runs the loader and stores its result: in Redis when `claim` is given (fenced
   * commit, lock released, waiters notified in the same script), else in L1 only.
   * A load is given up after `lock.maxHold`, so a loader that never settles cannot pin
   * its key, and a result that late is never stored (the delete fence lasts that long).
   */
  private async lead(call: Call, claim: Claim | undefined, notes: FlightNotes): Promise<Resolution> {
    const { key } = call
    if (claim) this.events.emit('leader', { key })
    const { lease: leaseMs, maxHold } = this.settings.lock
    const lease = claim?.lockValue && this.store
      ? new Lease(this.store, claim.keys, claim.lockValue, leaseMs, maxHold, key, claim.lockedAt, (reason) => this.events.emit('lock-lost', { key, reason }))
      : undefined
    const context = new LoadContext(key, lease?.signal ?? NEVER_ABORTED, notes.fallback?.value, call.policy, { background: call.background })
    // A background loader starts after the caller that triggered it has its stale answer.
    if (call.background) await new Promise((resolve) => setImmediate(resolve))
    const startedAt = performance.now()
    let value: unknown
    try {
      value = await withTimeout(this.runLoader(call.loader, context), maxHold, () => new LoaderTimeoutError(key, maxHold, 'lock.maxHold'))
    } catch (error) {
      await lease?.stop()
      this.events.emit('load', { key, durationMs: performance.now() - startedAt, error })
      return this.loadFailed(call, claim, error, notes.fallback)
    }
    await lease?.stop()
    const loadMs = performance.now() - startedAt
    this.events.emit('load', { key, durationMs: loadMs })
    return this.storeLoaded(call, claim, value, context, loadMs)
  }

  /** Encodes and stores a loaded value; the callers get it whatever happens to the write. */
  private async storeLoaded(call: Call, claim: Claim | undefined, value: unknown, context: LoadContext<unknown>, loadMs: number): Promise<Resolution> {
    const { key } = call
    const loaded: Resolution = { value, outcome: 'loaded', shareable: context.skip?.share ?? true }
    let data: string | Buffer | undefined
    if (context.skip) {
      this.events.emit('uncacheable', { key, reason: 'the loader called doNotCache()' })
    } else if (value === undefined) {
      this.events.emit('uncacheable', { key, reason: 'the loader returned undefined (return null to cache "nothing")' })
    } else {
      try {
        data = this.encode(key, value)
      } catch (error) {
        this.events.emit('uncacheable', { key, reason: (error as Error).message, error })
      }
    }
    if (data === undefined) {
      // Waiters elsewhere cannot receive this value: they run their own loaders.
      if (claim?.lockValue) await this.store?.release(claim.keys, claim.lockValue, 'u|', { passMs: context.skip?.passMs }).catch(() => {})
      return loaded
    }

    const life = this.jittered(context.lifetimes(loadMs))
    let written = true
    let version: string | undefined
    if (this.store) {
      const store = this.store
      const commit = () => store.commit(claim?.keys ?? entryKeys(this.settings.namespace, key), { lockValue: claim?.lockValue ?? '', token: claim?.token ?? '', data, ...life })
      try {
        version = await commit()
        written = version !== undefined
        if (!written) this.events.emit('fenced', { key })
      } catch {
        // Redis is unavailable: keep the value in L1; the lock expires by itself. If it is a
        // failover, commit again once the promoted node serves (fenced, so harmless if late),
        // so waiters elsewhere get the value instead of waiting out our lock. Within one lease:
        // after that the lock is gone and they have reloaded.
        if (claim?.lockValue) {
          const { lease, pollInterval } = this.settings.lock
          this.committing.add(key)
          this.track(store.throughFailover(commit, performance.now() + lease, pollInterval, { key: claim.keys.entry }).then((late) => late !== undefined || this.events.emit('fenced', { key })), () => this.committing.delete(key))
        }
      }
    }
    if (written) {
      this.remember(call, entryFrom(value, life, performance.now(), { version, size: data.length }))
      this.refreshHolds.delete(key) // the next early refresh is due for this new value
    }
    return loaded
  }

  private async loadFailed(call: Call, claim: Claim | undefined, error: unknown, fallback: Entry | undefined): Promise<Resolution> {
    const { key, policy } = call
    const covered = fallbackValid(fallback, performance.now())
    if (claim?.lockValue) {
      const message = encodeFailure(error) // never throws, whatever the loader threw
      const marks = covered ? { backoffMs: policy.failSafeBackoff } : { negativeMs: policy.negativeTtl }
      await this.store?.release(claim.keys, claim.lockValue, message, marks).catch(() => {})
    }
    if (!covered || !fallbackValid(fallback, performance.now())) throw error // it may have run out during the release
    const retryAt = performance.now() + policy.failSafeBackoff
    fallback.backoffUntil = retryAt
    this.holdRefresh(key, retryAt)
    this.events.emit('fail-safe', { key, error })
    return this.stale(key, fallback, 'fail-safe')
  }

  /**
   * Runs a caller's own loader and stores nothing (hit-for-miss, or a leader's private
   * result). Bounded like a lead by lock.maxHold, and by what is left of the caller's
   * hardTimeout when it started waiting at `since`.
   */
  private async loadUncached(call: Call, since = performance.now()): Promise<Resolution> {
    const { key, policy } = call
    const { maxHold } = this.settings.lock
    const hardLeft = policy.hardTimeout ? Math.max(0, policy.hardTimeout - (performance.now() - since)) : Infinity
    const context = new LoadContext(key, NEVER_ABORTED, undefined, policy, { uncached: true })
    const startedAt = performance.now()
    try {
      const loading = this.runLoader(call.loader, context)
      const value = await (hardLeft < maxHold
        ? withTimeout(loading, hardLeft, () => new LoaderTimeoutError(key, policy.hardTimeout))
        : withTimeout(loading, maxHold, () => new LoaderTimeoutError(key, maxHold, 'lock.maxHold')))
      this.events.emit('load', { key, durationMs: performance.now() - startedAt })
      return { value, outcome: 'loaded', shareable: false }
    } catch (error) {
      this.events.emit('load', { key, durationMs: performance.now() - startedAt, error })
      throw error
    }
  }

  /** Starts a loader on the next microtask, inside the load scope if one is installed. */
  private runLoader(loader: Loader<unknown>, context: LoadContext<unknown>): Promise<unknown> {
    const scope = this[LOAD_SCOPE]
    return Promise.resolve().then(() => (scope ? scope(context, () => loader(context)) : loader(context)))
  }

  private stale(key: string, entry: Entry, reason: StaleReason): Resolution {
    this.events.emit('stale', { key, reason })
    return { value: entry.value, outcome: 'stale', shareable: true }
  }

  // ── encoding and decoding ─────────────────────────────────────────────────

  /** The value as stored; throws `SerializationError` or `ValueTooLargeError` when it cannot be. */
  private encode(key: string, value: unknown): string | Buffer {
    let data: unknown
    try {
      data = encodeValue(this.settings.codec, value)
    } catch (error) {
      throw new SerializationError(key, `the codec could not encode it: ${describeFailure(error).message}`, error)
    }
    const max = this.settings.maxValueBytes
    if (Buffer.isBuffer(data)) {
      if (data.length > max) throw new ValueTooLargeError(key, data.length, max)
      return data
    }
    if (typeof data !== 'string') throw new SerializationError(key, `the codec returned ${typeof data}, not a string`)
    // A UTF-16 unit is 1 to 3 UTF-8 bytes: count the bytes only when the length cannot tell.
    if (data.length * 3 <= max) return data
    if (data.length > max) throw new ValueTooLargeError(key, undefined, max)
    const bytes = Buffer.byteLength(data)
    if (bytes > max) throw new ValueTooLargeError(key, bytes, max)
    return data
  }

  private decode(key: string, found: Lookup): Entry | undefined {
    if (found.corrupt) this.events.emit('corrupt', { key })
    if (found.data.length === 0 || found.state === 'miss') return undefined
    return this.decodeData(key, found.data, found.life, { version: found.version })
  }

  private decodeData(key: string, data: Buffer, life: Lifetimes, origin: EntryOrigin): Entry | undefined {
    try {
      return entryFrom(decodeValue(this.settings.codec, data), life, performance.now(), { ...origin, size: data.length })
    } catch (error) {
      this.events.emit('corrupt', { key, error })
      return undefined
    }
  }

  /** `c|<server now>|<record>` as published by commit.lua (see src/redis/record.ts). */
  private decodeCommitMessage(key: string, message: Buffer): Entry | undefined {
    const bar = message.indexOf('|', 2)
    const record = bar < 0 ? undefined : parseRecord(message, bar + 1, Number(message.toString('latin1', 2, bar)))
    if (!record) {
      this.events.emit('corrupt', { key })
      return undefined
    }
    return this.decodeData(key, record.data, record.life, { version: record.version })
  }

  /**
   * The fresh hit: one GET of the fresh copy (see docs/architecture.md). Undefined when
   * there is none, or it is corrupt, or the server clock is not known yet: the caller
   * then asks the get-or-lock script, which decides, repairs and measures the clock.
   */
  private async readFresh(key: string, keys: EntryKeys, store: RedisStore): Promise<Entry | undefined> {
    const text = await store.getFresh(keys)
    if (text === null) return undefined
    const record = text === FOREIGN_TYPE ? undefined : parseRecord(text, 0, store.clock.now()!)
    if (!record) {
      this.events.emit('corrupt', { key })
      return undefined
    }
    // Redis returned it, so it is fresh by the server clock, whatever our estimate of that says.
    // Nor fresher than its own ttl.
    record.life.freshMs = Math.max(0, record.life.ttlMs > 0 ? Math.min(record.life.freshMs, record.life.ttlMs) : record.life.freshMs)
    return this.decodeData(key, record.data, record.life, { version: record.version })
  }
}

/** Creates a cache. Without `redis` it runs in-process (L1 + single-flight). */
export function createCache(options: CacheOptions): Cache {
  return new Cache(options)
}
