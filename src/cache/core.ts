import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import type { Loader } from '../context.js'
import type { Entry, Lifetimes } from '../entry.js'
import { checkKey } from '../key.js'
import { CacheClosedError, InvalidArgumentError, RedisUnavailableError } from '../errors.js'
import { CacheEmitter, type StaleReason } from '../events.js'
import { MemoryTier } from '../memory/l1.js'
import { TagIndex } from '../memory/tag-index.js'
import { SingleFlight } from '../memory/single-flight.js'
import type { LoadScope } from './load-scope.js'
import type { CacheOptions, CallOptions } from '../options.js'
import { isFixedCallOptions, resolveCallPolicy, resolveSettings, type Policy, type Settings } from '../settings.js'
import { CircuitBreaker } from './redis/breaker.js'
import { invalidationChannel } from './redis/keys.js'
import { Notifier } from '../redis/notifier.js'
import { PollScheduler } from '../redis/poll-scheduler.js'
import { ServerProbe } from '../redis/server-probe.js'
import { RedisStore, type Broadcast } from './redis/store.js'
import { InvalidationBatch } from './redis/invalidations.js'
import { TagStore, tagChannel } from './redis/tags.js'
import { checkTags } from '../tag.js'
import type { Call, FlightNotes, Resolution } from './call.js'
import { StoredEntries } from './stored.js'
import { LoaderPermits } from './loader-permits.js'
import { Wakeups } from './wakeups.js'

/** Bound on remembered refresh holds; pruned of expired ones past it. */
const MAX_REFRESH_HOLDS = 10_000

/** The Redis side of a cache, all or nothing: a cache has every one of them, or runs in-process. */
interface RedisTiers {
  store: RedisStore
  notifier: Notifier
  polls: PollScheduler
  probe: ServerProbe
  tagStore: TagStore
  invalidations: InvalidationBatch
  breaker: CircuitBreaker
}

/**
 * What every part of the cache shares, handed to each in its constructor: the settings, the
 * tiers (L1, single-flight, Redis), the per-key bookkeeping of deletes, refreshes, waits and
 * background work, and the stored form of entries (`entries`). The parts: lead.ts (leading a
 * load), refresh.ts (background refresh, watchReload), answers.ts (what each answer returns),
 * timeouts.ts (each caller's timeouts), resolve.ts and wait.ts (one flight through Redis);
 * cache.ts holds them behind the public `Cache`.
 */
export class CacheCore {
  /** Wraps each loader call while `instrument()` traces this cache. */
  loadScope: LoadScope | undefined
  readonly settings: Settings
  /** Policies of fixed call options (see fixedCallOptions), resolved at their first call. */
  private readonly fixedPolicies = new WeakMap<CallOptions, Policy>()
  readonly events = new CacheEmitter()
  readonly memory: MemoryTier | undefined
  /** One flight per key; a settled one forgets its key's delete marker once no load needs it. */
  readonly flights = new SingleFlight<Resolution, FlightNotes>((key) => this.forgetDeleteMarker(key))
  readonly background = new Set<Promise<unknown>>()
  /** Background refreshes running now (grace and early refresh), capped by `maxBackgroundRefreshes`. */
  refreshing = 0
  /** Key → local time until which no early or background refresh is tried (one is under way elsewhere). */
  readonly refreshHolds = new Map<string, number>()
  /** Keys whose reload in another process this one is listening for (see watchReload). */
  readonly watching = new Map<string, { forgotten: boolean }>()
  /** Keys whose leader's commit is being retried through a failover (at most one lease each). */
  readonly committing = new Set<string>()
  /** Key → grace refreshes running outside the flight map (see leadInBackground). */
  readonly backgroundLeads = new Map<string, number>()
  /** Key → value of `deletions` when it was deleted while a flight for it was running. */
  readonly deletedAt = new Map<string, number>()
  deletions = 0
  readonly store: RedisStore | undefined
  /** delete()s and set()s of one tick, told to other processes in one message (invalidations.ts). */
  readonly invalidations: InvalidationBatch | undefined
  readonly notifier: Notifier | undefined
  /** Every cross-process wait's safety-net poll, on one timeline and one rate budget (`lock.maxPollRate`). */
  readonly polls: PollScheduler | undefined
  /** Parked waits whose news came, resumed a bounded number per turn (wakeups.ts). */
  readonly wakeups = new Wakeups()
  /** Cross-process waits running now (waits on another's load, and watchReload), capped by `maxPendingWaits`. */
  waitsOpen = 0
  /** Of those, the ones subscribed to their key's channel, capped by `maxWaits` (the rest are answered by the poll). */
  waitsSubscribed = 0
  readonly probe: ServerProbe | undefined
  /** `loaderConcurrency`'s permits; undefined when off. */
  readonly loaderPermits: LoaderPermits | undefined
  /** The tag scripts (docs/tags.md); with Redis only. */
  readonly tagStore: TagStore | undefined
  /** Which L1 entries this process knows the tags of, and when each tag was last invalidated here. */
  readonly tagIndex: TagIndex
  /** Entries as Redis and the channels carry them: encoding, decoding, the fresh copy. */
  readonly entries: StoredEntries
  /** How long a delete's fence outlives it: the longest a load may still commit. */
  readonly retentionMs: number
  closed = false
  readonly setUp: Promise<void> = Promise.resolve()
  /** Tags this cache's invalidation broadcasts, so it does not act on its own. */
  readonly id = randomBytes(8).toString('hex')

  constructor(options: CacheOptions) {
    this.settings = resolveSettings(options)
    const { l1, lock } = this.settings
    this.retentionMs = lock.maxHold + lock.lease
    if (l1) this.memory = new MemoryTier(l1.max, l1.maxBytes, l1.maxTtl)
    this.tagIndex = new TagIndex(l1 ? l1.max : 0)
    if (options.redis) {
      const tiers = this.connect(options.redis as Redis | Cluster)
      this.store = tiers.store
      this.invalidations = tiers.invalidations
      this.notifier = tiers.notifier
      this.polls = tiers.polls
      this.probe = tiers.probe
      this.tagStore = tiers.tagStore
      const cap = this.settings.loaderConcurrency
      if (cap)
        this.loaderPermits = new LoaderPermits(
          options.redis as Redis | Cluster,
          this.settings.namespace,
          cap.limit,
          cap.maxQueued,
          { leaseMs: lock.lease, commandTimeoutMs: this.settings.redisTimeout },
          () => tiers.breaker.isOpen(),
          this.events,
        )
      // In the background, so the first burst of a fresh process does not wait on it.
      this.setUp = Promise.all([tiers.store.warmUp(), tiers.notifier.warmUp()]).then(() => {})
    } else if (this.settings.policy.negativeTtl > 0) {
      throw new InvalidArgumentError('negativeTtl', 'needs Redis: it shares a failure across processes')
    } else if (!this.memory) {
      throw new InvalidArgumentError('l1', 'cannot be false without redis: nothing would be cached')
    }
    this.entries = new StoredEntries(this.settings, this.events, this.memory, this.store)
  }

  /** The Redis tiers on `client`, and the listeners that keep L1 in step with other processes. */
  private connect(client: Redis | Cluster): RedisTiers {
    if (typeof client.defineCommand !== 'function' || typeof client.duplicate !== 'function') {
      throw new InvalidArgumentError('redis', 'must be an ioredis Redis or Cluster client')
    }
    const { lock, redisTimeout, redisFailoverWait, breaker, namespace } = this.settings
    const probe = new ServerProbe(client, this.settings.shardedPubSub, redisTimeout, this.events)
    const circuit = new CircuitBreaker(breaker.threshold, breaker.openFor, this.events)
    const store = new RedisStore(
      client,
      redisTimeout,
      circuit,
      this.events,
      probe,
      redisFailoverWait,
      lock.waitForReplicas,
      this.settings.redisCommands,
    )
    const notifier = new Notifier(client, redisTimeout, probe)
    const polls = new PollScheduler((locks) => store.pollLocks(locks), lock.maxPollRate, store.clusterKeyOf)
    notifier.onLoss((phase) => {
      // Invalidations published meanwhile are gone: what L1 holds is checked with Redis before it is served again.
      this.memory?.suspectAll(performance.now())
      // And a commit message for a waiter: every wait polls now, not at its next planned poll.
      polls.pollAllNow()
      if (phase === 'lost')
        this.events.emit('redis-error', {
          operation: 'subscriber',
          error: new RedisUnavailableError('subscriber connection lost: waiters poll until it is back'),
        })
    })
    if (this.memory) {
      notifier.listen(invalidationChannel(namespace), (message) => this.forgetAll(message))
      notifier.listen(tagChannel(namespace), (message) => {
        const bar = message.indexOf('|')
        if (message.slice(0, bar) !== this.id) this.forgetTag(message.slice(bar + 1), 'remote')
      })
    }
    const channel = invalidationChannel(namespace)
    const invalidations = new InvalidationBatch(store, channel, this.id, this.retentionMs, store.clusterKeyOf)
    const tagStore = new TagStore(client, store, namespace)
    return { store, notifier, polls, probe, tagStore, invalidations, breaker: circuit }
  }

  // ── calls ─────────────────────────────────────────────────────────────────

  /** A checked call: throws `CacheClosedError`, or `InvalidArgumentError` naming the bad argument. */
  call(key: string, loader: unknown, options: CallOptions | undefined): Call {
    if (this.closed) throw new CacheClosedError()
    checkKey(key, this.settings.maxKeyLength)
    if (typeof loader !== 'function')
      throw new InvalidArgumentError('loader', `must be a function, got ${typeof loader}`)
    const call: Call = { key, loader: loader as Loader<unknown>, policy: this.settings.policy, epoch: this.deletions }
    if (options !== undefined) this.applyOptions(call, options)
    return call
  }

  /** The policy of a call's options; of fixed options (an HTTP route's), resolved once. */
  private policyOf(options: CallOptions): Policy {
    if (!isFixedCallOptions(options)) return resolveCallPolicy(this.settings.policy, options)
    let policy = this.fixedPolicies.get(options)
    if (policy === undefined)
      this.fixedPolicies.set(options, (policy = resolveCallPolicy(this.settings.policy, options)))
    return policy
  }

  /** Checks a call's options (`InvalidArgumentError` naming the bad one) and sets its policy, tags and forceRefresh. */
  applyOptions(call: Pick<Call, 'policy' | 'tags' | 'force'>, options: CallOptions): void {
    call.policy = this.policyOf(options)
    if (options.tags !== undefined) {
      const tags = checkTags(options.tags, 'tags')
      if (tags.length > 0) call.tags = tags
    }
    const force = options.forceRefresh
    if (force !== undefined && typeof force !== 'boolean')
      throw new InvalidArgumentError('forceRefresh', `must be a boolean, got ${typeof force}`)
    if (force) call.force = true
  }

  stale(key: string, entry: Entry, reason: StaleReason): Resolution {
    this.events.emit('stale', { key, reason })
    return { value: entry.value, outcome: 'stale', shareable: true }
  }

  /**
   * A stored ttl, shortened by up to `ttlJitter` so that keys loaded together expire apart.
   * The stale windows move with it: they stay `staleTtl` and `staleIfError` long (with 0, none),
   * so the jitter never turns into stale answers nobody asked for.
   */
  jittered(life: Lifetimes): Lifetimes {
    const { ttlJitter } = this.settings
    if (ttlJitter === 0) return life
    const freshMs = Math.max(1, Math.round(life.freshMs * (1 - ttlJitter * Math.random())))
    const cut = life.freshMs - freshMs
    return { ...life, freshMs, graceMs: life.graceMs - cut, fallbackMs: life.fallbackMs - cut }
  }

  // ── refresh holds ─────────────────────────────────────────────────────────

  dueForEarlyRefresh(call: Call, entry: Entry, now: number): boolean {
    const rule = call.policy.earlyRefresh
    if (rule.kind === 'off' || now < (this.refreshHolds.get(call.key) ?? 0)) return false
    const remaining = entry.freshUntil - now
    if (rule.kind === 'threshold') return remaining <= entry.ttlMs * (1 - rule.fraction)
    // XFetch: refresh when now − δ·β·ln(rand) ≥ expiry.
    return -entry.loadMs * rule.beta * Math.log(Math.random()) >= remaining
  }

  /** A subscribed wait may start: below `maxWaits` subscribed, and below `maxPendingWaits` in all. */
  subscribedWaitFree(): boolean {
    return this.waitsSubscribed < this.settings.maxWaits && this.waitsOpen < this.settings.maxPendingWaits
  }

  holdRefresh(key: string, until: number): void {
    if (this.refreshHolds.size >= MAX_REFRESH_HOLDS) {
      const now = performance.now()
      for (const [held, expiry] of this.refreshHolds) if (expiry <= now) this.refreshHolds.delete(held)
      if (this.refreshHolds.size >= MAX_REFRESH_HOLDS) this.refreshHolds.clear()
    }
    this.refreshHolds.set(key, until)
  }

  /** Counts a background refresh while it runs, for the `maxBackgroundRefreshes` cap. */
  countRefresh<T>(refresh: Promise<T>): Promise<T> {
    this.refreshing++
    refresh.then(
      () => this.refreshing--,
      () => this.refreshing--,
    )
    return refresh
  }

  // ── L1 and deletes ────────────────────────────────────────────────────────

  remember(call: Call, entry: Entry): void {
    if ((this.deletedAt.get(call.key) ?? -1) > call.epoch) return // deleted since this call began
    this.memory?.set(call.key, entry, performance.now())
  }

  /** remember() for a value this process loaded or set with `tags`: indexed, unless one of them was invalidated since the call began. */
  rememberTagged(call: Call, entry: Entry, tags: readonly string[] | undefined): void {
    if (!tags) return this.remember(call, entry)
    if (!this.memory || this.tagIndex.invalidatedSince(tags, call.epoch)) return
    this.remember(call, entry)
    const evicted = this.tagIndex.add(call.key, tags)
    if (evicted !== undefined) this.memory.delete(evicted) // an L1 entry whose tags are no longer tracked must go
  }

  /** Drops `key` from L1; a flight already running keeps its callers but cannot fill L1 or gain new callers. */
  forget(key: string): void {
    this.memory?.delete(key)
    this.tagIndex.remove(key)
    this.refreshHolds.delete(key)
    const watch = this.watching.get(key)
    if (watch) watch.forgotten = true
    this.deletions++
    if (this.busy(key)) {
      this.deletedAt.set(key, this.deletions)
      this.flights.detach(key)
    }
  }

  /**
   * Drops from L1 every entry this process knows carries `tag`, and keeps a load of this
   * process that began before now from putting its value there (see rememberTagged).
   * Entries other processes loaded are dropped by the per-key invalidations of the members.
   */
  forgetTag(tag: string, from: 'process' | 'remote'): void {
    for (const key of this.tagIndex.invalidate(tag, ++this.deletions)) this.forget(key)
    this.events.emit('tag-invalidated', { tag, from })
  }

  /**
   * An invalidation message from another process (`<cache id>|<JSON array of keys>`, see
   * invalidations.ts): each key dropped, our own skipped (done already). A text that is no
   * JSON array is one key, as versions that sent one message per key wrote it (a rolling
   * upgrade keeps their deletes).
   */
  private forgetAll(message: string): void {
    const bar = message.indexOf('|')
    if (bar < 0 || message.slice(0, bar) === this.id) return
    const text = message.slice(bar + 1)
    for (const key of keysIn(text)) this.forget(key)
  }

  /** The invalidation a forced refresh publishes with its commit, and set()'s undo of a late commit. */
  forgetMessage(key: string): Broadcast {
    return {
      channel: invalidationChannel(this.settings.namespace),
      message: InvalidationBatch.message(this.id, [key]),
    }
  }

  private forgetDeleteMarker(key: string): void {
    if (this.deletedAt.size > 0 && !this.busy(key)) this.deletedAt.delete(key)
  }

  /** Is any load for `key` running in this process: a flight, or a grace refresh outside the map? */
  busy(key: string): boolean {
    return this.flights.busy(key) || this.backgroundLeads.has(key)
  }

  // ── background work ───────────────────────────────────────────────────────

  /** Keeps `work` for close() to wait on until it settles (one reaction: this is on every call's path). */
  track(work: Promise<unknown>, then?: () => void): void {
    this.background.add(work)
    const done = () => {
      this.background.delete(work)
      then?.()
    }
    work.then(done, done)
  }

  /** Tracks a load outside the flight map for close(), and forgets its key's delete marker once no load needs it. */
  trackFlight(key: string, flight: Promise<unknown>): void {
    this.track(flight, () => this.forgetDeleteMarker(key))
  }

  /** What close() waits for: flights and background work still running. */
  unfinished(): Promise<unknown>[] {
    const flights = this.flights.size === 0 ? [] : [this.flights.idle()]
    return this.background.size === 0 ? flights : [...flights, ...this.background]
  }
}

function keysIn(text: string): string[] {
  if (!text.startsWith('[')) return [text]
  try {
    const keys: unknown = JSON.parse(text)
    if (Array.isArray(keys)) return keys.filter((key): key is string => typeof key === 'string')
  } catch {
    // one key that merely starts with '['
  }
  return [text]
}
