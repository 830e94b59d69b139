import { LoadContext, type Loader } from '../context.js'
import { entryFrom } from '../entry.js'
import { CacheClosedError, InvalidArgumentError } from '../errors.js'
import type { CacheEventName, CacheEvents, CacheStats } from '../events.js'
import type { CacheOptions, CallOptions } from '../options.js'
import { entryKeys } from './redis/keys.js'
import { checkTags } from '../tag.js'
import { NEVER_ABORTED, type LoadResult, type Resolution } from './call.js'
import { RequestMachine } from './request.js'
import { commitTagged, invalidateTags } from './tags.js'

const valueOf = (resolution: Resolution): unknown => resolution.value

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
export class Cache extends RequestMachine {
  // ── public API ────────────────────────────────────────────────────────────

  /**
   * The value for `key`: from L1, from Redis, from another process's load, or from
   * `loader` if this caller is elected to run it. Resolves with no await on an L1 hit.
   */
  getOrLoad<V>(key: string, loader: Loader<V>, options?: CallOptions): Promise<V> {
    const answer = this.lookup(key, loader, options)
    return (answer instanceof Promise ? answer.then(valueOf) : Promise.resolve(answer.value)) as Promise<V>
  }

  /** As `getOrLoad`, and also says how the value was obtained (the middleware's `X-Cache`). */
  async getOrLoadResult<V>(key: string, loader: Loader<V>, options?: CallOptions): Promise<LoadResult<V>> {
    const { value, outcome } = await this.lookup(key, loader, options)
    return { value: value as V, outcome }
  }

  /**
   * Stores `value` as a fresh load would, fenced: it supersedes every load in flight, and
   * other processes drop their L1 copy. Rejects on `undefined`, on a value the codec cannot
   * encode (`SerializationError`), on one above `maxValueBytes` (`ValueTooLargeError`) and
   * when Redis is unavailable (`RedisUnavailableError`). With `tags`, it is stored under
   * them as a load would be (docs/tags.md), unless one was invalidated since this call began.
   */
  async set<V>(key: string, value: V, options?: CallOptions): Promise<void> {
    const call = this.call(key, () => value, options)
    // A tagged value set now predates an invalidation after this (undefined: the clock is not measured yet).
    const [startedAt, startedLocal] = [this.store?.clock.now(), performance.now()]
    if (value === undefined)
      throw new InvalidArgumentError('value', 'undefined cannot be stored; use null for "nothing"')
    const data = this.encode(key, value)
    this.forget(key)
    const epoch = this.deletions // a delete() while we write must win over this value in L1
    const life = this.jittered(new LoadContext(key, NEVER_ABORTED, undefined, call.policy).lifetimes(0))
    let version: string | undefined
    const writtenFrom = performance.now() // L1's copy lives no longer than Redis's, which counts from when the write ran
    if (this.store) {
      const keys = entryKeys(this.settings.namespace, key)
      const request = { lockValue: '', token: '', data, ...life }
      if (call.tags) {
        const outcome = await commitTagged(
          this.store,
          this.tagStore!,
          keys,
          key,
          request,
          this.tagged(call.tags, startedAt, startedLocal),
          this.forgetMessage(key),
          this.retentionMs,
        )
        if (outcome.version === undefined) return void this.notStored(key, undefined, outcome.refused)
        version = outcome.version
      } else {
        version = await this.store.commit(keys, request, this.forgetMessage(key), this.retentionMs)
      }
      if (version === undefined) return
    }
    if (this.deletions === epoch)
      this.rememberTagged({ ...call, epoch }, entryFrom(value, life, writtenFrom, version, data.length), call.tags)
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
  async deleteByTags(tags: readonly string[]): Promise<void> {
    if (this.closed) throw new CacheClosedError()
    const checked = checkTags(tags, 'tags')
    for (const tag of checked) this.forgetTag(tag, 'process')
    const store = this.store
    if (!store) return
    const how = {
      namespace: this.settings.namespace,
      id: this.id,
      retentionMs: this.retentionMs,
      forget: (key: string) => this.forget(key),
      keyMessage: (key: string) => this.forgetMessage(key),
    }
    await invalidateTags(store, this.tagStore!, checked, how)
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
    if (this.closed) return
    this.closed = true
    this.polls?.interruptAll() // each wait sees `closed` once woken, or after the lookup it is in
    for (let work = this.unfinished(); work.length > 0; work = this.unfinished()) await Promise.allSettled(work)
    this.store?.close()
    this.probe?.close()
    this.notifier?.close()
    this.memory?.clear()
    this.events.removeAll()
  }
}

/** Creates a cache. Without `redis` it runs in-process (L1 + single-flight). */
export function createCache(options: CacheOptions): Cache {
  return new Cache(options)
}
