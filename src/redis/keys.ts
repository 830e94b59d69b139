import { createHash } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'

/** @internal ioredis prefixes KEYS (so our channels inside scripts) but neither PUBLISH nor SUBSCRIBE arguments. */
export function keyPrefixOf(client: Redis | Cluster): string {
  return (client.options as { keyPrefix?: string }).keyPrefix ?? ''
}

/** The Redis names of one cache entry. All share one hash tag, so one slot in Cluster. */
export interface EntryKeys {
  /** The cache key these names are for: events about them name it. */
  key: string
  /** Hash holding the value, its deadlines, the fence and the token counter. */
  entry: string
  /** String `<owner>:<token>` with PX = lease. */
  lock: string
  /** Pub/sub channel on which commits and failures are announced. */
  channel: string
  /** String `x|s|e|l|t|f|data` with PX = the time left fresh: a fresh hit is one GET of it. */
  fresh: string
}

/**
 * `<ns>:{k:<key>}`; a key containing braces would break the hash tag, so it is
 * replaced by its SHA-256 as `{h:<hex>}`. The `k:`/`h:` prefixes keep the two
 * spaces apart, so no plain key can collide with a hashed one.
 */
export function entryKeys(namespace: string, key: string): EntryKeys {
  return keysUnder(entryName(namespace, key), key)
}

/**
 * The names of a `createLocks` lock (Redis and Redlock backends): `<ns>:{l:<key>}` (the token
 * counter, as `entry`) and its `:lock` and `:ch`, hashed as `{lh:<hex>}`. A space apart from
 * the cache's `{k:}`/`{h:}`, the run-once claims' `{o:}`/`{oh:}` and the tags' `{t:}`/`{th:}`,
 * so a cache and locks sharing a namespace never touch each other's keys.
 */
export function lockKeys(namespace: string, key: string): EntryKeys {
  return keysUnder(`${namespace}:${hashTag('l', 'lh', key)}`, key)
}

function keysUnder(entry: string, key: string): EntryKeys {
  return { key, entry, lock: `${entry}:lock`, channel: `${entry}:ch`, fresh: `${entry}:v` }
}

/**
 * `{<plain>:<name>}`, or `{<hashed>:<sha256 hex>}` when `name` contains a brace (which would
 * break the hash tag). Distinct prefixes keep the two spaces apart.
 */
export function hashTag(plain: string, hashed: string, name: string): string {
  return name.includes('{') || name.includes('}')
    ? `{${hashed}:${createHash('sha256').update(name).digest('hex')}}`
    : `{${plain}:${name}}`
}

/** `EntryKeys.fresh` alone: all a fresh hit needs. */
export function freshKeyOf(namespace: string, key: string): string {
  return `${entryName(namespace, key)}:v`
}

function entryName(namespace: string, key: string): string {
  return `${namespace}:${hashTag('k', 'h', key)}`
}

/** Channel on which deletions are broadcast so every process drops its L1 copy. */
export function invalidationChannel(namespace: string): string {
  return `${namespace}:__invalidations`
}
