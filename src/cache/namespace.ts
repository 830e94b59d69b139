import type { Loader } from '../context.js'
import type { CallOptions, DeleteOptions } from '../options.js'
import { checkKey } from '../key.js'
import { checkTags } from '../tag.js'
import type { DeleteOutcome } from './delete-outbox.js'
import type { LoadResult } from './call.js'
import type { Generations } from './generations.js'
import { wrapFunction, type WrapOptions, type Wrapped } from './wrap.js'
import type { BatchLoader, BatchResult } from './batch-loads.js'
import { createBatcher, type Batcher, type BatcherOptions } from './batcher.js'
import type { ManyResult } from './load-many.js'
import { InvalidArgumentError } from '../errors.js'

/** What a namespace asks of its cache: the cache's own methods, given the stored key. */
export interface NamespaceHost {
  getOrLoad<V>(key: string, loader: Loader<V>, options?: CallOptions): Promise<V>
  getOrLoadResult<V>(key: string, loader: Loader<V>, options?: CallOptions): Promise<LoadResult<V>>
  get<V = unknown>(key: string): Promise<V | undefined>
  has(key: string): Promise<boolean>
  set<V>(key: string, value: V, options?: CallOptions): Promise<void>
  delete(key: string, options?: DeleteOptions): Promise<DeleteOutcome>
  deleteByTags(tags: readonly string[]): Promise<void>
  getOrLoadMany<V>(
    keys: readonly string[],
    batchLoader: BatchLoader<V>,
    options?: CallOptions,
  ): Promise<Map<string, ManyResult<V>>>
  expire(key: string): Promise<boolean>
  expireByTag(tag: string): Promise<number>
  ready(): Promise<void>
}

/** How a cache opens a namespace: its generations, the options check of `wrap`, the longest key. */
export interface NamespaceParts {
  generations: Generations
  checkCallOptions: (options: CallOptions) => void
  maxKeyLength: number
}

let openNamespace: (host: NamespaceHost, parts: NamespaceParts, name: string) => CacheNamespace

/** @internal `cache.namespace(name)`; `name` is checked by the caller. */
export function namespaceOf(host: NamespaceHost, parts: NamespaceParts, name: string): CacheNamespace {
  return openNamespace(host, parts, name)
}

/**
 * A view of a cache under one name (`cache.namespace('users')`): the cache's API on keys and
 * tags of its own, which no other namespace, nor the cache's plain keys, can see. It shares
 * everything with its cache: the Redis connections (the subscriber connection too), L1, the
 * budgets, the events and `stats()` (which name keys as stored: `\0ns\0<name>\0<generation>\0<key>`).
 * `clear()` empties it in every process with one command (docs/namespaces.md).
 */
export class CacheNamespace {
  /** The namespace's name. */
  readonly name: string
  readonly #host: NamespaceHost
  readonly #parts: NamespaceParts

  static {
    openNamespace = (host, parts, name) => new CacheNamespace(host, parts, name)
  }

  private constructor(host: NamespaceHost, parts: NamespaceParts, name: string) {
    this.name = name
    this.#host = host
    this.#parts = parts
  }

  /** `cache.getOrLoad` on this namespace's `key` (tags are this namespace's too). */
  getOrLoad<V>(key: string, loader: Loader<V>, options?: CallOptions): Promise<V> {
    return this.#on(key, options, (stored, own) => this.#host.getOrLoad(stored, loader, own))
  }

  /** `cache.getOrLoadResult` on this namespace's `key`. */
  getOrLoadResult<V>(key: string, loader: Loader<V>, options?: CallOptions): Promise<LoadResult<V>> {
    return this.#on(key, options, (stored, own) => this.#host.getOrLoadResult(stored, loader, own))
  }

  /** `cache.get` on this namespace's `key`: never loads; `undefined` on a miss. */
  get<V = unknown>(key: string): Promise<V | undefined> {
    return this.#on(key, undefined, (stored) => this.#host.get<V>(stored))
  }

  /** `cache.has` on this namespace's `key`. */
  has(key: string): Promise<boolean> {
    return this.#on(key, undefined, (stored) => this.#host.has(stored))
  }

  /** `cache.set` on this namespace's `key`. */
  set<V>(key: string, value: V, options?: CallOptions): Promise<void> {
    return this.#on(key, options, (stored, own) => this.#host.set(stored, value, own))
  }

  /** `cache.delete` on this namespace's `key` (`durable` as there). */
  delete(key: string, options?: DeleteOptions): Promise<DeleteOutcome> {
    return this.#on(key, undefined, (stored) => this.#host.delete(stored, options))
  }

  /** `cache.deleteByTag` on this namespace's `tag`: entries of other namespaces with the same tag stay. */
  deleteByTag(tag: string): Promise<void> {
    return this.deleteByTags([tag])
  }

  /** `cache.deleteByTags` on this namespace's tags. */
  deleteByTags(tags: readonly string[]): Promise<void> {
    let checked: string[]
    try {
      checked = checkTags(tags, 'tags')
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#prefixed((prefix) => this.#host.deleteByTags(checked.map((tag) => prefix + tag)))
  }

  /**
   * `cache.getOrLoadMany` on this namespace's keys: `batchLoader` gets and returns them as
   * given here, and the Map is keyed by them.
   */
  getOrLoadMany<V>(
    keys: readonly string[],
    batchLoader: BatchLoader<V>,
    options?: CallOptions,
  ): Promise<Map<string, ManyResult<V>>> {
    if (!Array.isArray(keys))
      return Promise.reject(new InvalidArgumentError('keys', `must be an array, got ${typeof keys}`))
    if (typeof batchLoader !== 'function')
      return Promise.reject(new InvalidArgumentError('batchLoader', `must be a function, got ${typeof batchLoader}`))
    return this.#prefixed(async (prefix) => {
      for (const key of keys) if (typeof key !== 'string' || key === '') checkKey(key, this.#parts.maxKeyLength)
      const own = (stored: string) => stored.slice(prefix.length)
      const loader: BatchLoader<V> = async (stored, context) =>
        storedResult(await batchLoader(stored.map(own), context), prefix)
      const results = await this.#host.getOrLoadMany(
        keys.map((key) => prefix + key),
        loader,
        this.#ownTags(options, prefix),
      )
      return new Map([...results].map(([stored, result]) => [own(stored), result]))
    })
  }

  /** `cache.batcher` on this namespace's keys. */
  batcher<V>(batchLoader: BatchLoader<V>, options?: BatcherOptions): Batcher<V> {
    return createBatcher<V>(
      (keys, loader, callOptions) => this.getOrLoadMany(keys, loader, callOptions),
      this.#parts.checkCallOptions,
      (key) => checkKey(key, this.#parts.maxKeyLength),
      batchLoader,
      options,
    )
  }

  /** `cache.expire` on this namespace's `key`. */
  expire(key: string): Promise<boolean> {
    return this.#on(key, undefined, (stored) => this.#host.expire(stored))
  }

  /** `cache.expireByTag` on this namespace's `tag`: entries of other namespaces with the same tag stay. */
  expireByTag(tag: string): Promise<number> {
    let checked: string
    try {
      checked = checkTags([tag], 'tag')[0]!
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#prefixed((prefix) => this.#host.expireByTag(prefix + checked))
  }

  /** `cache.wrap` with this namespace's keys: `options.key(...args)` names an entry of this namespace. */
  wrap<A extends unknown[], R>(fn: (...args: A) => R | Promise<R>, options: WrapOptions<A>): Wrapped<A, R> {
    const getOrLoad = (key: string, loader: () => unknown, callOptions: CallOptions) =>
      this.getOrLoad(key, loader, callOptions)
    return wrapFunction(getOrLoad, this.#parts.checkCallOptions, fn, options)
  }

  /**
   * Empties this namespace in every process sharing the cache's Redis and `namespace` option,
   * with one command (its generation is raised; the old entries become unreachable and expire
   * by their own lifetimes). Once it resolves, no call of this process returns a value stored
   * before it, not even as a stale or fail-safe fallback, and no load begun before it can put
   * its value where a later call finds it; other processes follow as soon as the bump reaches
   * them over pub/sub (docs/namespaces.md has the exact guarantee). Rejects with
   * `RedisUnavailableError` when Redis could not be told (nothing was cleared anywhere).
   */
  clear(): Promise<void> {
    return this.#parts.generations.clear(this.name)
  }

  /** `cache.ready()`: a namespace has no set-up of its own. */
  ready(): Promise<void> {
    return this.#host.ready()
  }

  /** Runs `run` with the stored form of `key`, and `options` with their tags in this namespace. */
  #on<T>(
    key: string,
    options: CallOptions | undefined,
    run: (stored: string, options: CallOptions | undefined) => Promise<T>,
  ): Promise<T> {
    // The cache checks the stored key (the prefix is well-formed, so it is iff `key` is); only
    // what the prefix would hide is checked here.
    if (typeof key !== 'string' || key === '')
      try {
        checkKey(key, this.#parts.maxKeyLength)
      } catch (error) {
        return Promise.reject(error)
      }
    return this.#prefixed((prefix) => run(prefix + key, this.#ownTags(options, prefix)))
  }

  #prefixed<T>(run: (prefix: string) => Promise<T>): Promise<T> {
    const prefix = this.#parts.generations.prefix(this.name)
    if (typeof prefix !== 'string') return prefix.then(run)
    try {
      return run(prefix)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** `options` with each tag in this namespace (checked first: a bad one is named as the caller gave it). */
  #ownTags(options: CallOptions | undefined, prefix: string): CallOptions | undefined {
    if (options?.tags === undefined) return options
    return { ...options, tags: checkTags(options.tags, 'tags').map((tag) => prefix + tag) }
  }
}

/** A batch loader's result by stored key: a Map keyed by the namespace's keys gets the prefix back. */
function storedResult<V>(result: BatchResult<V>, prefix: string): BatchResult<V> {
  if (!(result instanceof Map)) return result
  return new Map([...result].map(([key, value]) => [prefix + key, value]))
}
