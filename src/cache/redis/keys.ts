import { hashTag, type LockNames } from '../../redis/keys.js'

/** The Redis names of one cache entry. All share one hash tag, so one slot in Cluster. */
export interface EntryKeys extends LockNames {
  /** The cache key these names are for: events about them name it. */
  key: string
  /** Hash holding the value, its deadlines, the fence and the token counter. */
  entry: string
  /** String `x|s|e|l|t|f|data` with PX = the time left fresh: a fresh hit is one GET of it. */
  fresh: string
}

/**
 * `<ns>:{k:<key>}` and its `:lock`, `:ch` and `:v`; a key containing braces would break the
 * hash tag, so it is replaced by its SHA-256 as `{h:<hex>}` (hashTag).
 */
export function entryKeys(namespace: string, key: string): EntryKeys {
  const entry = entryName(namespace, key)
  return { key, entry, lock: `${entry}:lock`, channel: `${entry}:ch`, fresh: `${entry}:v` }
}

/** `EntryKeys.fresh` alone: all a fresh hit needs. */
export function freshKeyOf(namespace: string, key: string): string {
  return `${entryName(namespace, key)}:v`
}

/** `EntryKeys.lock` alone: what a poll of a waited-on lock sends. */
export function lockKeyOf(namespace: string, key: string): string {
  return `${entryName(namespace, key)}:lock`
}

function entryName(namespace: string, key: string): string {
  return `${namespace}:${hashTag('k', 'h', key)}`
}

/** Channel on which deletions are broadcast so every process drops its L1 copy. */
export function invalidationChannel(namespace: string): string {
  return `${namespace}:__invalidations`
}
