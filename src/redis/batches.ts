/**
 * What one multi-key script call may take: on a Cluster, keys of one slot only. Every name
 * of one entry shares a hash tag, and different entries have different tags, so batches on a
 * Cluster are grouped by tag (the same slot, without computing CRC16): per entry, in practice.
 */

import type { Cluster, Redis } from 'ioredis'
import { keyPrefixOf } from './store.js'

/** On a Cluster, a key's full name as Redis sees it (for its hash tag); undefined elsewhere, where any keys share a call. */
export function clusterKeyOf(client: Redis | Cluster): ((key: string) => string) | undefined {
  if (client.isCluster !== true) return undefined
  const prefix = keyPrefixOf(client)
  return (key) => prefix + key
}

/** The part of a key that Redis Cluster hashes: its first non-empty `{…}`, else the whole key. */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{')
  if (open < 0) return key
  const close = key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
}

/**
 * Splits `items` into batches of at most `max`; on a Cluster (`keyOf` given: an item's full
 * key, `keyPrefix` included) each batch also holds keys of one hash tag only.
 */
export function batchesOf<T>(items: readonly T[], max: number, keyOf?: (item: T) => string): T[][] {
  const groups = keyOf ? groupBy(items, (item) => hashTagOf(keyOf(item))) : [items]
  const batches: T[][] = []
  for (const group of groups) {
    for (let from = 0; from < group.length; from += max) batches.push(group.slice(from, from + max))
  }
  return batches
}

function groupBy<T>(items: readonly T[], tagOf: (item: T) => string): T[][] {
  const groups = new Map<string, T[]>()
  for (const item of items) {
    const tag = tagOf(item)
    const group = groups.get(tag)
    if (group) group.push(item)
    else groups.set(tag, [item])
  }
  return [...groups.values()]
}
