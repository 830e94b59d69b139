import { batchesOf, TickQueue } from '../../redis/batches.js'
import type { EntryKeys } from './keys.js'
import type { Broadcast, RedisStore } from './store.js'

/** Most entries one invalidate.lua call deletes: a larger call blocks Redis for longer. */
const MAX_KEYS_PER_MESSAGE = 500
/** About the most key text (UTF-16 units) one message carries, so a message stays small. */
const MAX_KEY_CHARS_PER_MESSAGE = 64 * 1024

interface Pending {
  readonly key: string
  /** The names to delete; undefined: the write is done (set()), only announce it. */
  readonly keys: EntryKeys | undefined
  resolve(): void
  reject(error: unknown): void
}

/**
 * The L1 invalidations of one tick, sent as one invalidate.lua call and one message on the
 * invalidation channel (per slot on a Cluster), instead of a script and a message per key.
 * A message is `<cache id>|<JSON array of keys>`: the cache's id once, then each key once, so
 * a subscriber's output buffer holds about the keys' own bytes per invalidation (one frame
 * per key, with the channel and the id in each, was about 80 bytes more per key). Receivers
 * parse one message per tick, not one per key. A delete's message is published by the script
 * that deletes, so it never succeeds untold; a set() is announced once its commit is done.
 * Each caller is answered when its call was: a failed call rejects every caller it carried.
 */
export class InvalidationBatch {
  private readonly pending = new TickQueue<Pending>((due) => this.flush(due))

  /** @internal `keyOf` on a Cluster: an entry name's full key (for its slot). */
  constructor(
    private readonly store: RedisStore,
    private readonly channel: string,
    private readonly cacheId: string,
    private readonly retentionMs: number,
    private readonly keyOf?: (name: string) => string,
  ) {}

  /** delete(): deletes `keys` in Redis (value and fresh copy, fence kept) and tells every other process. */
  invalidate(keys: EntryKeys): Promise<void> {
    return this.add(keys.key, keys)
  }

  /** set(), once its commit is done: tells every other process to drop `key` from L1. */
  announce(key: string): Promise<void> {
    return this.add(key, undefined)
  }

  /**
   * Sends what is pending now, not at the end of the tick: a write about to go out (set())
   * must follow the deletes called before it on the same connection, or a delete called
   * first would run after it and remove its value.
   */
  sendPending(): void {
    this.pending.flushNow()
  }

  /** The message for `keys`, as invalidate.lua and commit.lua publish it. */
  static message(cacheId: string, keys: readonly string[]): string {
    return `${cacheId}|${JSON.stringify(keys)}`
  }

  private add(key: string, keys: EntryKeys | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => this.pending.push({ key, keys, resolve, reject }))
  }

  private flush(due: Pending[]): void {
    const deletes = due.filter((item) => item.keys !== undefined)
    const announced = due.filter((item) => item.keys === undefined)
    const bySlot = batchesOf(deletes, MAX_KEYS_PER_MESSAGE, this.keyOf && ((item) => this.keyOf!(item.keys!.entry)))
    const batches = bySlot.flatMap(capped)
    // Announcements need no slot: they ride with the last message while it has room.
    let last = batches.at(-1)
    let lastChars = last ? chars(last) : 0
    for (const item of announced) {
      if (!last || last.length >= MAX_KEYS_PER_MESSAGE || lastChars + item.key.length > MAX_KEY_CHARS_PER_MESSAGE) {
        last = []
        lastChars = 0
        batches.push(last)
      }
      last.push(item)
      lastChars += item.key.length
    }
    for (const batch of batches) this.send(batch)
  }

  private send(batch: Pending[]): void {
    const entries = batch.flatMap((item) => (item.keys ? [item.keys] : []))
    const broadcast: Broadcast = {
      channel: this.channel,
      message: InvalidationBatch.message(
        this.cacheId,
        batch.map((item) => item.key),
      ),
    }
    this.store.invalidate(entries, this.retentionMs, broadcast).then(
      () => batch.forEach((item) => item.resolve()),
      (error: unknown) => batch.forEach((item) => item.reject(error)),
    )
  }
}

function chars(batch: readonly Pending[]): number {
  return batch.reduce((sum, item) => sum + item.key.length, 0)
}

/** Splits a batch so each message carries about `MAX_KEY_CHARS_PER_MESSAGE` of key text at most. */
function capped(batch: Pending[]): Pending[][] {
  let current: Pending[] = []
  const parts = [current]
  let size = 0
  for (const item of batch) {
    if (size + item.key.length > MAX_KEY_CHARS_PER_MESSAGE && current.length > 0) {
      current = []
      parts.push(current)
      size = 0
    }
    current.push(item)
    size += item.key.length
  }
  return parts
}
