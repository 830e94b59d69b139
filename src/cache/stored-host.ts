import type { Loader } from '../context.js'
import type { CallOptions, DeleteOptions } from '../options.js'
import type { BatchLoader } from './batch-loads.js'
import type { Resolution } from './call.js'
import type { CacheCore } from './core.js'
import type { Deletes } from './delete-outbox.js'
import type { Expiry } from './expire.js'
import type { LoadLeader } from './lead.js'
import { getOrLoadMany, type ManyParts } from './load-many.js'
import type { NamespaceHost } from './namespace.js'
import { peek } from './peek.js'
import { deleteByTags, setValue } from './writes.js'

const valueOf = (resolution: Resolution): unknown => resolution.value

/** What the cache's methods on stored keys are made of (Cache's parts). */
export interface StoredHostParts {
  core: CacheCore
  leader: LoadLeader
  deletes: Deletes
  expiry: Expiry
  many: ManyParts
  /** A resolution straight from L1, or the key's flight (Cache#answer). */
  answer(key: string, loader: unknown, options: CallOptions | undefined): Resolution | Promise<Resolution>
}

/**
 * The cache's methods on keys and tags as stored, which views call with their prefix: the
 * namespaces, and the view of a `clearable` cache's own keys. Without `clearable` the cache's
 * public methods are these.
 */
export function storedHost(parts: StoredHostParts): NamespaceHost {
  const { core, leader, deletes, expiry } = parts
  return {
    getOrLoad: <V>(key: string, loader: Loader<V>, options?: CallOptions) => {
      const answer = parts.answer(key, loader, options) // an L1 hit: no await, as on the cache
      return (answer instanceof Promise ? answer.then(valueOf) : Promise.resolve(answer.value)) as Promise<V>
    },
    getOrLoadResult: async <V>(key: string, loader: Loader<V>, options?: CallOptions) => {
      const { value, outcome } = await parts.answer(key, loader, options)
      return { value: value as V, outcome }
    },
    get: async <V>(key: string) => (await peek(core, key)).value as V | undefined,
    has: async (key: string) => (await peek(core, key)).found,
    set: <V>(key: string, value: V, options?: CallOptions) => setValue(core, leader, key, value, options),
    delete: (key: string, options?: DeleteOptions) => deletes.delete(key, options),
    deleteByTags: (tags: readonly string[]) => deleteByTags(core, tags),
    getOrLoadMany: <V>(keys: readonly string[], batchLoader: BatchLoader<V>, options?: CallOptions) =>
      getOrLoadMany(parts.many, keys, batchLoader, options),
    expire: (key: string) => expiry.expire(key),
    expireByTag: (tag: string) => expiry.expireByTag(tag),
    ready: () => core.setUp,
  }
}
