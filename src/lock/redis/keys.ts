import { hashTag, type LockNames } from '../../redis/keys.js'

/** The Redis names of one `createLocks` lock (Redis and Redlock backends). All share one hash tag, so one slot in Cluster. */
export interface LockKeys extends LockNames {
  /** The user's key these names are for. */
  key: string
  /** String: the last fencing token issued for this key (acquire.lua). */
  counter: string
}

/**
 * `<ns>:{l:<key>}` (the token counter) and its `:lock` and `:ch`, hashed as `{lh:<hex>}`
 * when the key has a brace (hashTag).
 */
export function lockKeys(namespace: string, key: string): LockKeys {
  const counter = `${namespace}:${hashTag('l', 'lh', key)}`
  return { key, counter, lock: `${counter}:lock`, channel: `${counter}:ch` }
}
