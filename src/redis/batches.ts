/**
 * What one multi-key script call may take: on a Cluster, keys of one slot only. Every name of
 * one entry shares a hash tag and different entries have different tags, so on a Cluster a
 * batch holds the entries whose tags share a slot: few, in practice.
 */
import type { Cluster, Redis } from 'ioredis'
import { keySlot } from './failing-clock.js'
import { keyPrefixOf } from './keys.js'

/** @internal On a Cluster, a key's full name as Redis sees it (for its slot); undefined elsewhere, where any keys share a call. */
export function clusterKeyOf(client: Redis | Cluster): ((key: string) => string) | undefined {
  if (client.isCluster !== true) return undefined
  const prefix = keyPrefixOf(client)
  return (key) => prefix + key
}

/**
 * Splits `items` into batches of at most `max`; on a Cluster (`keyOf` given: an item's full
 * key, `keyPrefix` included) each batch also holds keys of one slot only.
 */
export function batchesOf<T>(items: readonly T[], max: number, keyOf?: (item: T) => string): T[][] {
  const groups = keyOf ? groupBy(items, (item) => keySlot(keyOf(item))) : [items]
  const batches: T[][] = []
  for (const group of groups) {
    for (let from = 0; from < group.length; from += max) batches.push(group.slice(from, from + max))
  }
  return batches
}

/**
 * The reply of `send()`, one script call for a batch of `count` items, checked to hold one
 * answer per item. A `send` that throws rejects, so the caller fails its batch in one place.
 */
export function repliesFor(count: number, script: string, send: () => Promise<unknown>): Promise<unknown[]> {
  let sent: Promise<unknown>
  try {
    sent = send()
  } catch (error) {
    return Promise.reject(error)
  }
  return sent.then((reply) => {
    if (!Array.isArray(reply) || reply.length !== count)
      throw new Error(`${script} answered ${JSON.stringify(reply)?.slice(0, 100)}`)
    return reply
  })
}

function groupBy<T>(items: readonly T[], slotOf: (item: T) => number): T[][] {
  const groups = new Map<number, T[]>()
  for (const item of items) {
    const slot = slotOf(item)
    const group = groups.get(slot)
    if (group) group.push(item)
    else groups.set(slot, [item])
  }
  return [...groups.values()]
}

/**
 * Items gathered over one tick of the event loop and handed to `flush` together, once the
 * tick's microtasks have run: what a burst of callers asks at once goes out as one call.
 */
export class TickQueue<T> {
  #items: T[] = []
  #scheduled = false

  constructor(private readonly flush: (items: T[]) => void) {}

  push(item: T): void {
    this.#items.push(item)
    if (this.#scheduled) return
    this.#scheduled = true
    setImmediate(() => {
      this.#scheduled = false
      this.flushNow()
    })
  }

  /** Hands over what is gathered now, not at the end of the tick. */
  flushNow(): void {
    if (this.#items.length === 0) return
    const items = this.#items
    this.#items = []
    this.flush(items)
  }
}
