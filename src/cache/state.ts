import { randomBytes } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'
import type { Loader } from '../context.js'
import { decodeValue, encodeValue, entryFrom, type Entry, type Lifetimes } from '../entry.js'
import { checkKey } from '../key.js'
import { describeFailure } from '../loader-error.js'
import {
  CacheClosedError,
  InvalidArgumentError,
  RedisUnavailableError,
  SerializationError,
  ValueTooLargeError,
} from '../errors.js'
import { CacheEmitter, type StaleReason } from '../events.js'
import { MemoryTier } from '../memory/l1.js'
import { TagIndex } from '../memory/tag-index.js'
import { SingleFlight } from '../memory/single-flight.js'
import { LOAD_SCOPE, type LoadScope } from '../observability/load-scope.js'
import { resolveCallPolicy, resolveSettings, type CacheOptions, type CallOptions, type Settings } from '../options.js'
import { CircuitBreaker } from '../redis/breaker.js'
import { invalidationChannel, type EntryKeys } from '../redis/keys.js'
import { Notifier } from '../redis/notifier.js'
import { PollScheduler } from '../redis/poll-scheduler.js'
import { lifetimesOf, newerVersion, parseRecord, type StoredRecord } from '../redis/record.js'
import { ServerProbe } from '../redis/server-probe.js'
import { FOREIGN_TYPE, type FreshRead } from '../redis/fresh-reads.js'
import { RedisStore, type Broadcast, type Lookup } from '../redis/store.js'
import { TagStore, tagChannel } from '../redis/tags.js'
import { checkTags } from '../tag.js'
import { type Call, type FlightNotes, type Resolution, messageKind } from './call.js'

/** Bound on remembered refresh holds; pruned of expired ones past it. */
const MAX_REFRESH_HOLDS = 10_000

/**
 * What every layer of the cache shares: settings, the tiers (L1, single-flight, Redis),
 * the bookkeeping of deletes and background work, and encoding. The layers above it:
 * lead.ts (leading a load), refresh.ts (background refresh, watchReload), answers.ts
 * (what each answer returns), timeouts.ts (each caller's timeouts), request.ts (the
 * request state machine), cache.ts (the public front).
 */
export abstract class CacheState {
  /** Wraps each loader call while `instrument()` traces this cache. */
  [LOAD_SCOPE]: LoadScope | undefined
  protected readonly settings: Settings
  protected readonly events = new CacheEmitter()
  protected readonly memory: MemoryTier | undefined
  /** One flight per key; a settled one forgets its key's delete marker once no load needs it. */
  protected readonly flights = new SingleFlight<Resolution, FlightNotes>((key) => this.forgetDeleteMarker(key))
  protected readonly background = new Set<Promise<unknown>>()
  /** Background refreshes running now (grace and early refresh), capped by `maxBackgroundRefreshes`. */
  protected refreshing = 0
  /** Key → local time until which no early or background refresh is tried (one is under way elsewhere). */
  protected readonly refreshHolds = new Map<string, number>()
  /** Keys whose reload in another process this one is listening for (see watchReload). */
  protected readonly watching = new Map<string, { forgotten: boolean }>()
  /** Keys whose leader's commit is being retried through a failover (at most one lease each). */
  protected readonly committing = new Set<string>()
  /** Key → grace refreshes running outside the flight map (see leadInBackground). */
  protected readonly backgroundLeads = new Map<string, number>()
  /** Key → value of `deletions` when it was deleted while a flight for it was running. */
  protected readonly deletedAt = new Map<string, number>()
  protected deletions = 0
  protected readonly store: RedisStore | undefined
  protected readonly notifier: Notifier | undefined
  /** Every cross-process wait's safety-net poll, on one timeline and one rate budget (`lock.maxPollRate`). */
  protected readonly polls: PollScheduler | undefined
  /** Cross-process waits running now (waits on another's load, and watchReload), capped by `maxWaits`. */
  protected waitsOpen = 0
  protected readonly probe: ServerProbe | undefined
  /** The tag scripts (docs/tags.md); with Redis only. */
  protected readonly tagStore: TagStore | undefined
  /** Which L1 entries this process knows the tags of, and when each tag was last invalidated here. */
  protected readonly tagIndex: TagIndex
  /** How long a delete's fence outlives it: the longest a load may still commit. */
  protected readonly retentionMs: number
  protected closed = false
  protected readonly setUp: Promise<void> = Promise.resolve()
  /** Tags this cache's invalidation broadcasts, so it does not act on its own. */
  protected readonly id = randomBytes(8).toString('hex')

  constructor(options: CacheOptions) {
    this.settings = resolveSettings(options)
    const { l1, lock, redisTimeout, redisFailoverWait, breaker, namespace } = this.settings
    this.retentionMs = lock.maxHold + lock.lease
    if (l1) this.memory = new MemoryTier(l1.max, l1.maxBytes, l1.maxTtl)
    this.tagIndex = new TagIndex(l1 ? l1.max : 0)
    if (options.redis) {
      const client = options.redis as Redis | Cluster
      if (typeof client.defineCommand !== 'function' || typeof client.duplicate !== 'function') {
        throw new InvalidArgumentError('redis', 'must be an ioredis Redis or Cluster client')
      }
      this.probe = new ServerProbe(client, this.settings.shardedPubSub, redisTimeout, this.events)
      const circuit = new CircuitBreaker(breaker.threshold, breaker.openFor, this.events)
      this.store = new RedisStore(
        client,
        redisTimeout,
        circuit,
        this.events,
        this.probe,
        redisFailoverWait,
        lock.waitForReplicas,
        this.settings.redisCommands,
      )
      this.notifier = new Notifier(client, redisTimeout, this.probe)
      const store = this.store
      this.polls = new PollScheduler((locks) => store.pollLocks(locks), lock.maxPollRate, store.clusterKeyOf)
      this.tagStore = new TagStore(client, this.store, namespace)
      this.notifier.onLoss((phase) => {
        // Invalidations published meanwhile are gone: what L1 holds is checked with Redis before it is served again.
        this.memory?.suspectAll(performance.now())
        // And a commit message for a waiter: every wait polls now, not at its next planned poll.
        this.polls?.pollAllNow()
        if (phase === 'lost')
          this.events.emit('redis-error', {
            operation: 'subscriber',
            error: new RedisUnavailableError('subscriber connection lost: waiters poll until it is back'),
          })
      })
      if (this.memory) {
        this.notifier.listen(invalidationChannel(namespace), (message) => {
          const bar = message.indexOf('|')
          if (message.slice(0, bar) !== this.id) this.forget(message.slice(bar + 1)) // our own deletes are done already
        })
        this.notifier.listen(tagChannel(namespace), (message) => {
          const bar = message.indexOf('|')
          if (message.slice(0, bar) !== this.id) this.forgetTag(message.slice(bar + 1), 'remote')
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

  // ── L1 bookkeeping ────────────────────────────────────────────────────────

  protected call(key: string, loader: unknown, options: CallOptions | undefined): Call {
    if (this.closed) throw new CacheClosedError()
    checkKey(key, this.settings.maxKeyLength)
    if (typeof loader !== 'function')
      throw new InvalidArgumentError('loader', `must be a function, got ${typeof loader}`)
    const policy = options === undefined ? this.settings.policy : resolveCallPolicy(this.settings.policy, options)
    const call: Call = { key, loader: loader as Loader<unknown>, policy, epoch: this.deletions }
    if (options?.tags !== undefined) {
      const tags = checkTags(options.tags, 'tags')
      if (tags.length > 0) call.tags = tags
    }
    return call
  }

  protected dueForEarlyRefresh(call: Call, entry: Entry, now: number): boolean {
    const rule = call.policy.earlyRefresh
    if (rule.kind === 'off' || now < (this.refreshHolds.get(call.key) ?? 0)) return false
    const remaining = entry.freshUntil - now
    if (rule.kind === 'threshold') return remaining <= entry.ttlMs * (1 - rule.fraction)
    // XFetch: refresh when now − δ·β·ln(rand) ≥ expiry.
    return -entry.loadMs * rule.beta * Math.log(Math.random()) >= remaining
  }

  protected holdRefresh(key: string, until: number): void {
    if (this.refreshHolds.size >= MAX_REFRESH_HOLDS) {
      const now = performance.now()
      for (const [held, expiry] of this.refreshHolds) if (expiry <= now) this.refreshHolds.delete(held)
      if (this.refreshHolds.size >= MAX_REFRESH_HOLDS) this.refreshHolds.clear()
    }
    this.refreshHolds.set(key, until)
  }

  protected remember(call: Call, entry: Entry): void {
    if ((this.deletedAt.get(call.key) ?? -1) > call.epoch) return // deleted since this call began
    this.memory?.set(call.key, entry, performance.now())
  }

  /** Drops `key` from L1; a flight already running keeps its callers but cannot fill L1 or gain new callers. */
  protected forget(key: string): void {
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
  protected forgetTag(tag: string, from: 'process' | 'remote'): void {
    for (const key of this.tagIndex.invalidate(tag, ++this.deletions)) this.forget(key)
    this.events.emit('tag-invalidated', { tag, from })
  }

  /** remember() for a value this process loaded or set with `tags`: indexed, unless one of them was invalidated since the call began. */
  protected rememberTagged(call: Call, entry: Entry, tags: readonly string[] | undefined): void {
    if (!tags) return this.remember(call, entry)
    if (!this.memory || this.tagIndex.invalidatedSince(tags, call.epoch)) return
    this.remember(call, entry)
    const evicted = this.tagIndex.add(call.key, tags)
    if (evicted !== undefined) this.memory.delete(evicted) // an L1 entry whose tags are no longer tracked must go
  }

  /** The invalidation that delete() and set() publish with their write. */
  protected forgetMessage(key: string): Broadcast {
    return { channel: invalidationChannel(this.settings.namespace), message: `${this.id}|${key}` }
  }

  /** Tracks a load outside the flight map for close(), and forgets its key's delete marker once no load needs it. */
  protected trackFlight(key: string, flight: Promise<unknown>): void {
    this.track(flight, () => this.forgetDeleteMarker(key))
  }

  private forgetDeleteMarker(key: string): void {
    if (this.deletedAt.size > 0 && !this.busy(key)) this.deletedAt.delete(key)
  }

  /** Counts a background refresh while it runs, for the `maxBackgroundRefreshes` cap. */
  protected countRefresh<T>(refresh: Promise<T>): Promise<T> {
    this.refreshing++
    refresh.then(
      () => this.refreshing--,
      () => this.refreshing--,
    )
    return refresh
  }

  /**
   * A stored ttl, shortened by up to `ttlJitter` so that keys loaded together expire apart.
   * The stale windows move with it: they stay `staleTtl` and `staleIfError` long (with 0, none),
   * so the jitter never turns into stale answers nobody asked for.
   */
  protected jittered(life: Lifetimes): Lifetimes {
    const { ttlJitter } = this.settings
    if (ttlJitter === 0) return life
    const freshMs = Math.max(1, Math.round(life.freshMs * (1 - ttlJitter * Math.random())))
    const cut = life.freshMs - freshMs
    return { ...life, freshMs, graceMs: life.graceMs - cut, fallbackMs: life.fallbackMs - cut }
  }

  /** Is any load for `key` running in this process: a flight, or a grace refresh outside the map? */
  protected busy(key: string): boolean {
    return this.flights.busy(key) || this.backgroundLeads.has(key)
  }

  /** What close() waits for: flights and background work still running. */
  protected unfinished(): Promise<unknown>[] {
    const flights = this.flights.size === 0 ? [] : [this.flights.idle()]
    return this.background.size === 0 ? flights : [...flights, ...this.background]
  }

  /** Keeps `work` for close() to wait on until it settles (one reaction: this is on every call's path). */
  protected track(work: Promise<unknown>, then?: () => void): void {
    this.background.add(work)
    const done = () => {
      this.background.delete(work)
      then?.()
    }
    work.then(done, done)
  }

  protected stale(key: string, entry: Entry, reason: StaleReason): Resolution {
    this.events.emit('stale', { key, reason })
    return { value: entry.value, outcome: 'stale', shareable: true }
  }

  // ── encoding and decoding ─────────────────────────────────────────────────

  /** The value as stored; throws `SerializationError` or `ValueTooLargeError` when it cannot be. */
  protected encode(key: string, value: unknown): string | Buffer {
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

  protected decode(key: string, found: Lookup): Entry | undefined {
    if (found.corrupt) this.events.emit('corrupt', { key })
    if (found.data.length === 0 || found.state === 'miss') return undefined
    return this.decodeData(key, found.data, found.life, found.version, found.sentAt)
  }

  /**
   * `fallback`, unless a lookup's `fence` shows the key was deleted after it was written (a
   * version below the fence): then undefined, and dropped from L1 if that is where it came from.
   * A process that missed the delete's broadcast would otherwise serve the deleted value as
   * fail-safe. No fence (the hash was lost with Redis) keeps it: that is what fail-safe is for.
   */
  protected unlessDeleted(key: string, fallback: Entry | undefined, fence: string): Entry | undefined {
    if (!fallback || fence === '' || !newerVersion(fence, fallback.version)) return fallback
    if (this.memory?.get(key) === fallback) this.memory.delete(key)
    return undefined
  }

  /** `at`: the local time `life` counts from (now, unless the lifetimes were measured earlier). */
  protected decodeData(
    key: string,
    data: Buffer,
    life: Lifetimes,
    version: string,
    at = performance.now(),
  ): Entry | undefined {
    try {
      return entryFrom(decodeValue(this.settings.codec, data), life, at, version, data.length)
    } catch (error) {
      this.events.emit('corrupt', { key, error })
      return undefined
    }
  }

  /** `c|<server now>|<record>` as published by commit.lua (see src/redis/record.ts). */
  protected decodeCommitMessage(key: string, message: Buffer): Entry | undefined {
    const bar = message.indexOf('|', 2)
    // The server time it was sent at places the record's deadlines: digits, or the message is corrupt
    // (Number('') is 0 and Number('abc') NaN, with which every deadline check passes).
    const now = bar < 0 ? '' : message.toString('latin1', 2, bar)
    const record = /^\d{1,16}$/.test(now) ? parseRecord(message, bar + 1, Number(now)) : undefined
    if (!record) {
      this.events.emit('corrupt', { key })
      return undefined
    }
    // Its deadlines count from the server's time now, not from when it was published: a message
    // read late (a busy event loop) must not make L1 keep the value longer than Redis does.
    const published = Number(now)
    const life = lifetimesOf(record, Math.max(published, this.store?.clock.now() ?? published))
    return this.decodeData(key, record.data, life, record.version)
  }

  /** The value a commit message announces: carried in it ('c'), or read with one GET (a notice, 'n', for a large value). */
  protected async committedEntry(key: string, keys: EntryKeys, message: Buffer): Promise<Entry | undefined> {
    switch (messageKind(message)) {
      case 'c':
        return this.decodeCommitMessage(key, message)
      case 'n':
        return this.store && this.store.clock.now() !== undefined ? this.readFresh(key, keys, this.store) : undefined
      default:
        return undefined
    }
  }

  /**
   * The fresh hit: one GET of the fresh copy (see docs/architecture.md). Undefined when
   * there is none, or it is corrupt, or the server clock is not known yet: the caller
   * then asks the get-or-lock script, which decides, repairs and measures the clock.
   */
  protected readFresh(key: string, keys: EntryKeys, store: RedisStore): Promise<Entry | undefined> {
    return store.getFresh(keys.fresh).then((read) => this.freshEntry(key, read, store))
  }

  /** What a read of the fresh copy found, decoded; undefined when nothing (or nothing usable) was there. */
  protected freshEntry(key: string, read: FreshRead, store: RedisStore): Entry | undefined {
    const serverNow = store.clock.now()!
    const record = this.freshRecord(key, read, serverNow)
    if (!record) return undefined
    // Redis returned it, so it is fresh by the server clock, whatever our estimate of that says.
    // Nor fresher than its own ttl.
    const life = lifetimesOf(record, serverNow)
    life.freshMs = Math.max(0, life.ttlMs > 0 ? Math.min(life.freshMs, life.ttlMs) : life.freshMs)
    return this.decodeData(key, record.data, life, record.version)
  }

  /** The record a read of the fresh copy found; undefined when none, or a corrupt one (reported). */
  protected freshRecord(key: string, read: FreshRead, serverNow: number): StoredRecord | undefined {
    if (read === null) return undefined
    const record = read === FOREIGN_TYPE ? undefined : parseRecord(read, 0, serverNow)
    if (!record) this.events.emit('corrupt', { key })
    return record
  }
}
