import { createHash } from 'node:crypto'
import type { Cluster, Redis } from 'ioredis'

/** @internal ioredis prefixes KEYS (so our channels inside scripts) but neither PUBLISH nor SUBSCRIBE arguments. */
export function keyPrefixOf(client: Redis | Cluster): string {
  return (client.options as { keyPrefix?: string }).keyPrefix ?? ''
}

/**
 * The names every Redis lock has, a cache entry's and a `createLocks` lock's alike: what
 * release-owner.lua takes (src/redis/abandoned.ts).
 */
export interface LockNames {
  /** String `<owner>:<token>` with PX = lease. */
  lock: string
  /** Pub/sub channel on which the lock's release is announced. */
  channel: string
}

/**
 * `{<plain>:<name>}`, or `{<hashed>:<sha256 hex>}` when `name` contains a brace (which would
 * break the hash tag). Distinct prefixes keep the two spaces apart, so no plain name can
 * collide with a hashed one. Each kind of name has its own pair (the cache's `k`/`h`, the
 * tags' `t`/`th`, the locks' `l`/`lh`, the run-once claims' `o`/`oh`), so a cache and locks
 * sharing a namespace never touch each other's keys.
 */
export function hashTag(plain: string, hashed: string, name: string): string {
  return name.includes('{') || name.includes('}')
    ? `{${hashed}:${createHash('sha256').update(name).digest('hex')}}`
    : `{${plain}:${name}}`
}
