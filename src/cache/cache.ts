import type { Loader } from '../context.js'
import type { CacheEventName, CacheEvents, CacheStats } from '../events.js'
import { LOAD_SCOPE, type LoadScope } from './load-scope.js'
import type { CacheOptions, CallOptions } from '../options.js'
import { Answers } from './answers.js'
import { type Call, type LoadResult, type Resolution } from './call.js'
import { CacheCore } from './core.js'
import { LoadLeader } from './lead.js'
import { Refresher } from './refresh.js'
import { Resolver } from './resolve.js'
import { CallerTimeouts } from './timeouts.js'
import { wrapFunction, type WrapOptions, type Wrapped } from './wrap.js'
import type { Cluster, Redis } from 'ioredis'
import type { DeleteOptions } from '../options.js'
import { Deletes, type DeleteOutcome } from './delete-outbox.js'
import { Generations, checkNamespaceName } from './generations.js'
import { namespaceOf, type CacheNamespace, type NamespaceHost, type NamespaceParts } from './namespace.js'
import type { BatchLoader } from './batch-loads.js'
import { createBatcher, type Batcher, type BatcherOptions } from './batcher.js'
import { Expiry } from './expire.js'
import { KeyFlights } from './key-flights.js'
import type { ManyResult } from './load-many.js'
import { storedHost } from './stored-host.js'
import { checkKey } from '../key.js'

const valueOf = (resolution: Resolution): unknown => resolution.value

/** A cache's parts, for tests of its bookkeeping (not exported from the package entry points). */
export interface CacheParts {
  core: CacheCore
  refresher: Refresher
}
let partsOf: (cache: Cache) => CacheParts

/**
 * The cache. Every `getOrLoad` takes one path through its parts:
 *
 *   L1 fresh → return (no await)        L1 in grace → return stale, refresh in background
 *   else, once per key per process (single-flight), one GET of the fresh copy → return if there,
 *   else Redis is asked in ONE script:
 *     fresh → return                    grace → return stale (+ refresh if we won the lock)
 *     lock won → `lead()`               lock held → subscribe, re-check, wait for the commit message
 *     backoff → return stale            pass (hit-for-miss) → run own loader, store nothing
 *     error (negative caching) → the recent error, or stale
 *     Redis unavailable → `lead()` in-process only
 *   Each caller's softTimeout / hardTimeout race the flight; the flight itself runs on.
 */
export class Cache {
  // The parts, sharing one CacheCore (settings, tiers, per-key bookkeeping), in #private fields:
  // a class rather than an interface and a factory, so that `Cache` stays the value it has been
  // (`instanceof`, `new Cache(options)`), while its .d.ts shows nothing but the public API.
  readonly #core: CacheCore
  readonly #refresher: Refresher
  /** One request's way to its answer: L1, then the key's flight (key-flights.ts). */
  readonly #flights: KeyFlights
  readonly #expiry: Expiry
  /** `delete()` and its outbox of durable deletes (delete-outbox.ts). */
  readonly #deletes: Deletes
  /** The namespaces' generations, from the first `namespace()` or `clear()` on (generations.ts). */
  #generations: Generations | undefined
  readonly #client: Redis | Cluster | undefined
  /** The cache's methods on keys as stored: what views call (namespaces, and `#own`). */
  readonly #stored: NamespaceHost
  /**
   * `clearable`: the view the cache's own keys go through, which stores them under the
   * cache-wide generation (`\0ns\0\0<generation>\0<key>`); undefined otherwise (keys as given).
   */
  readonly #own: CacheNamespace | undefined

  static {
    partsOf = (cache) => ({ core: cache.#core, refresher: cache.#refresher })
  }

  constructor(options: CacheOptions) {
    const core = (this.#core = new CacheCore(options))
    const leader = new LoadLeader(core)
    // A refresh whose copy leaves its grace while it asks Redis goes on as a foreground flight: the
    // refresher is handed the resolver's resolve, bound late (the resolver needs the refresher too).
    const refresher: Refresher = (this.#refresher = new Refresher(core, leader, (call, notes) =>
      resolver.resolve(call, notes),
    ))
    const answers = new Answers(core, leader, refresher)
    const timeouts = new CallerTimeouts(core, answers)
    const resolver: Resolver = new Resolver(core, leader, refresher, answers)
    const flights = (this.#flights = new KeyFlights(core, leader, answers, timeouts, resolver))
    this.#client = options.redis as Redis | Cluster | undefined
    this.#deletes = new Deletes(core, this.#client, options.durableDeletes)
    this.#expiry = new Expiry(core, options.redis as Redis | Cluster | undefined)
    this.#stored = storedHost({
      core,
      leader,
      deletes: this.#deletes,
      expiry: this.#expiry,
      many: {
        core,
        answers,
        resolver,
        timeouts,
        fly: (call: Call) => flights.fly(call),
      },
      answer: (key, loader, options) => flights.answer(key, loader, options),
    })
    // The empty name is the cache's own keys' (no namespace has it); subscribed to bumps from now on.
    this.#own = core.settings.clearable ? namespaceOf(this.#stored, this.#viewParts(), '') : undefined
  }

  /** The load scope `instrument()` installs (load-scope.ts). */
  get [LOAD_SCOPE](): LoadScope | undefined {
    return this.#core.loadScope
  }

  set [LOAD_SCOPE](scope: LoadScope | undefined) {
    this.#core.loadScope = scope
  }

  // ── public API ────────────────────────────────────────────────────────────

  /**
   * The value for `key`: from L1, from Redis, from another process's load, or from
   * `loader` if this caller is elected to run it. Resolves with no await on an L1 hit.
   */
  getOrLoad<V>(key: string, loader: Loader<V>, options?: CallOptions): Promise<V> {
    if (this.#own) return this.#own.getOrLoad(key, loader, options)
    const answer = this.#flights.answer(key, loader, options)
    return (answer instanceof Promise ? answer.then(valueOf) : Promise.resolve(answer.value)) as Promise<V>
  }

  /** As `getOrLoad`, and also says how the value was obtained (the middleware's `X-Cache`). */
  getOrLoadResult<V>(key: string, loader: Loader<V>, options?: CallOptions): Promise<LoadResult<V>> {
    return (this.#own ?? this.#stored).getOrLoadResult(key, loader, options)
  }

  /**
   * The value cached for `key`, without loading it: L1's fresh copy (no round trip), else one
   * GET of Redis's fresh copy (which then fills L1). `undefined` when no fresh value is cached:
   * a stale copy (in grace or kept for fail-safe) counts as a miss, as it would be reloaded.
   * Rejects with `InvalidArgumentError` on a bad key (nothing sent), `CacheClosedError` after
   * `close()`, and `RedisUnavailableError` when Redis cannot be asked (a miss would be a guess).
   */
  get<V = unknown>(key: string): Promise<V | undefined> {
    return (this.#own ?? this.#stored).get<V>(key)
  }

  /** Whether `get(key)` would find a value (a cached `null` counts); the same reads and errors. */
  has(key: string): Promise<boolean> {
    return (this.#own ?? this.#stored).has(key)
  }

  /**
   * A cached version of the async function `fn`: each call is a `getOrLoad` of the key
   * `options.key(...args)` that runs `fn(...args)` on a miss, with the rest of `options` as its
   * call options (checked now: a bad one throws `InvalidArgumentError` naming it, and so do a
   * `fn` or `options.key` that is not a function).
   */
  wrap<A extends unknown[], R>(fn: (...args: A) => R | Promise<R>, options: WrapOptions<A>): Wrapped<A, R> {
    const core = this.#core
    const getOrLoad = (key: string, loader: () => unknown, callOptions: CallOptions) =>
      this.getOrLoad(key, loader, callOptions)
    return wrapFunction(
      getOrLoad,
      (callOptions) => core.applyOptions({ policy: core.settings.policy }, callOptions),
      fn,
      options,
    )
  }

  /**
   * The values of `keys` (1 to 10,000, none twice), each as `getOrLoad` gives it, the batch's
   * work shared: L1, then one MGET and one get-or-lock script (200 keys at most) per slot, and ONE
   * `batchLoader` call with only the keys this process must load (a key another process is
   * loading is waited for, never loaded again). Resolves with a Map from each key, in order,
   * to a `PromiseSettledResult`: a key fails alone (its loader error, or `BatchResultError`
   * when the result lacks it). Rejects only on bad input (`InvalidArgumentError`) or after
   * `close()`. `options` apply to every key (`forceRefresh` is refused). See docs/api.md.
   */
  getOrLoadMany<V>(
    keys: readonly string[],
    batchLoader: BatchLoader<V>,
    options?: CallOptions,
  ): Promise<Map<string, ManyResult<V>>> {
    return (this.#own ?? this.#stored).getOrLoadMany(keys, batchLoader, options)
  }

  /**
   * A DataLoader-style front on `getOrLoadMany`: `batcher.load(key)` resolves with the key's
   * value, and the keys `load`ed in one tick of the event loop go out as one `getOrLoadMany`,
   * so the loads they need are one `batchLoader` call. `options` (checked now: a bad one throws
   * `InvalidArgumentError` naming it) are those calls' options, plus `maxBatchSize`.
   */
  batcher<V>(batchLoader: BatchLoader<V>, options?: BatcherOptions): Batcher<V> {
    const core = this.#core
    return createBatcher<V>(
      (keys, loader, callOptions) => this.getOrLoadMany(keys, loader, callOptions),
      (callOptions) => core.applyOptions({ policy: core.settings.policy }, callOptions),
      (key) => checkKey(key, core.settings.maxKeyLength),
      batchLoader,
      options,
    )
  }

  /**
   * Soft invalidation: `key`'s value becomes stale now, without disappearing. The next call,
   * in any process, reloads it (one load across processes) while every other call is served
   * the stale value, for up to `staleTtl` from now; other processes drop their L1 copy. With
   * `staleTtl: 0` nobody gets the old value: the next call loads, the others wait for it.
   * Only a fresh value is touched (a deleted or newer value never is): resolves `true` when
   * one was made stale. Rejects with `InvalidArgumentError` on a bad key,
   * `RedisUnavailableError` if Redis could not be told. See docs/api.md.
   */
  expire(key: string): Promise<boolean> {
    return (this.#own ?? this.#stored).expire(key)
  }

  /**
   * `expire` for every entry stored with `tag` (docs/tags.md): each is made stale as `expire`
   * makes one. Resolves with how many fresh values were made stale. Rejects with
   * `InvalidArgumentError` on a bad tag, `RedisUnavailableError` if Redis could not be told
   * (calling it again finishes the job).
   */
  expireByTag(tag: string): Promise<number> {
    return (this.#own ?? this.#stored).expireByTag(tag)
  }

  /**
   * Stores `value` as a fresh load would, fenced: it supersedes every load in flight, and
   * other processes drop their L1 copy. Rejects on `undefined`, on a value the codec cannot
   * encode (`SerializationError`), on one above `maxValueBytes` (`ValueTooLargeError`) and
   * when Redis is unavailable (`RedisUnavailableError`). With `tags`, it is stored under
   * them as a load would be (docs/tags.md), unless one was invalidated since this call began.
   */
  set<V>(key: string, value: V, options?: CallOptions): Promise<void> {
    return (this.#own ?? this.#stored).set(key, value, options)
  }

  /**
   * Removes every entry stored with `tag` (see docs/tags.md): once it resolves, no process
   * returns a value of such an entry loaded before the call, from Redis at once, from L1
   * once the broadcast arrives (within `l1.maxTtl` if it is lost), and a load in flight
   * cannot store its result under the tag. Rejects with `RedisUnavailableError` if Redis
   * could not be told; calling it again finishes the job.
   */
  async deleteByTag(tag: string): Promise<void> {
    await this.deleteByTags([tag])
  }

  /** `deleteByTag` for several tags at once (each tag on its own slot; the tags marked invalidated in parallel, then their members deleted). */
  deleteByTags(tags: readonly string[]): Promise<void> {
    return (this.#own ?? this.#stored).deleteByTags(tags)
  }

  /**
   * Removes `key` everywhere: this process's L1, Redis, and (over pub/sub) every other
   * process's L1. A load that began before this call cannot store its result after it.
   * Resolves `'deleted'`. When Redis cannot be told it rejects with `RedisUnavailableError`,
   * unless the delete is durable (`options.durable: 'queue'`, or `durableDeletes.default`):
   * then it is queued, resolves `'queued'`, and is replayed, fenced, once Redis answers
   * (docs/durable-deletes.md).
   */
  delete(key: string, options?: DeleteOptions): Promise<DeleteOutcome> {
    return (this.#own ?? this.#stored).delete(key, options)
  }

  /**
   * A view of this cache whose keys and tags are its own (docs/namespaces.md): the same API,
   * the same connections, L1 and budgets, and a `clear()` that empties it in every process with
   * one command. `name`: a non-empty string without `\0`, at most 256 characters
   * (`InvalidArgumentError` otherwise). Cheap: views of one name share everything.
   */
  namespace(name: string): CacheNamespace {
    checkNamespaceName(name)
    return namespaceOf(this.#stored, this.#viewParts(), name)
  }

  /**
   * Empties this cache in every process sharing its Redis and `namespace` option, with one
   * command (the cache-wide generation is raised; old entries become unreachable and expire by
   * their own lifetimes). What it empties depends on the `clearable` option:
   * - `clearable: false` (the default): every namespace (see `namespace()`). Keys used on the
   *   cache itself, outside any namespace, are NOT cleared.
   * - `clearable: true`: every namespace and the cache's own keys: everything the cache stores.
   *
   * What it empties, it empties as a namespace's `clear()` does: once it resolves, no call of
   * this process returns a value stored before it, not even as a stale or fail-safe fallback,
   * and no load begun before it can put its value where a later call finds it; other
   * processes follow as soon as the bump reaches them over pub/sub (docs/namespaces.md).
   * Rejects with `RedisUnavailableError` when Redis could not be told (nothing was cleared
   * anywhere), and with `CacheClosedError` after `close()`.
   */
  clear(): Promise<void> {
    return this.#namespaces().clear(undefined)
  }

  #viewParts(): NamespaceParts {
    const core = this.#core
    return {
      generations: this.#namespaces(),
      checkCallOptions: (options: CallOptions) => core.applyOptions({ policy: core.settings.policy }, options),
      maxKeyLength: core.settings.maxKeyLength,
    }
  }

  #namespaces(): Generations {
    return (this.#generations ??= new Generations(this.#core, this.#client))
  }

  /**
   * Resolves once the set-up that `createCache` started in the background is done: the
   * subscriber connection is open, the scripts are loaded and the server clock is known.
   * Optional: a server may await it before it listens, so its first burst pays none of it.
   * Never rejects, and resolves within about `redisTimeout` even when Redis is down.
   */
  ready(): Promise<void> {
    return this.#core.setUp
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on<E extends CacheEventName>(event: E, listener: (payload: CacheEvents[E]) => void): () => void {
    return this.#core.events.on(event, listener)
  }

  /** Counters, one per event name, since the cache was created. */
  stats(): CacheStats {
    return this.#core.events.stats()
  }

  /**
   * Stops accepting calls, waits for loads and background refreshes in flight (each is
   * bounded by `lock.maxHold`), then closes the subscriber connection. The Redis client
   * you passed in stays open.
   *
   * Calls waiting for another process's load do not hold it up to their `waitTimeout`:
   * their waits end at once (after a lookup already sent, one `redisTimeout` at most), and
   * each serves its stale copy if it has one in grace or fail-safe (`stale`, reason
   * `'wait-timeout'`), else rejects with `CacheClosedError` (not `onWaitTimeout`: a load
   * started now would be one more for close() to wait on). A commit message already
   * received still answers. Watching another process's refresh in the background ends
   * within `lock.maxPollInterval`.
   */
  async close(): Promise<void> {
    const core = this.#core
    if (core.closed) return
    core.closed = true
    core.polls?.interruptAll() // each wait sees `closed` once woken, or after the lookup it is in
    for (let work = core.unfinished(); work.length > 0; work = core.unfinished()) await Promise.allSettled(work)
    await this.#deletes.close()
    await core.loaderPermits?.close()
    core.store?.close()
    core.probe?.close()
    core.notifier?.close()
    core.memory?.clear()
    core.events.removeAll()
  }
}

/** The parts of `cache`, for tests that check its bookkeeping. */
export function cacheParts(cache: Cache): CacheParts {
  return partsOf(cache)
}

/** Creates a cache. Without `redis` it runs in-process (L1 + single-flight). */
export function createCache(options: CacheOptions): Cache {
  return new Cache(options)
}
