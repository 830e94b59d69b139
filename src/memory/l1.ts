import { LRUCache } from 'lru-cache'
import type { Entry } from '../entry.js'

/**
 * The per-process tier. Freshness is judged by the deadlines inside each entry;
 * lru-cache's own ttl only evicts an entry once even its fail-safe fallback is
 * useless, so stale values stay at hand for grace and fail-safe serving.
 * It is bounded by entries and by bytes (each entry's encoded length, at least 1): an
 * entry larger than the byte bound is not kept at all (lru-cache's maxEntrySize).
 */
export class MemoryTier {
  private readonly lru: LRUCache<string, Entry>
  /** Entries to check with Redis before serving them again, with the deadlines they had. */
  private readonly suspects = new WeakMap<Entry, { freshUntil: number; graceUntil: number }>()

  constructor(
    max: number,
    maxBytes: number,
    private readonly maxTtl: number,
  ) {
    this.lru = new LRUCache<string, Entry>({
      max,
      maxSize: maxBytes,
      sizeCalculation: (entry) => Math.max(1, entry.size),
      ttl: 0,
      ttlAutopurge: false,
      allowStale: false,
    })
  }

  get(key: string): Entry | undefined {
    return this.lru.get(key)
  }

  set(key: string, entry: Entry, now: number): void {
    const ttl = Math.min(Math.max(entry.fallbackUntil, entry.freshUntil) - now, this.maxTtl)
    if (ttl < 1) {
      this.lru.delete(key)
      return
    }
    if (this.maxTtl !== Infinity) {
      // An entry must not outlive maxTtl as fresh either, or it would be served fresh from a dead slot.
      const cap = now + this.maxTtl
      entry.freshUntil = Math.min(entry.freshUntil, cap)
      entry.graceUntil = Math.min(entry.graceUntil, cap)
      entry.fallbackUntil = Math.min(entry.fallbackUntil, cap)
    }
    this.lru.set(key, entry, { ttl: Math.ceil(ttl) }) // too large: not stored, and an older copy is dropped
  }

  /**
   * An invalidation may have been missed (the subscriber connection dropped or came back):
   * every entry now looks expired, so its next call asks Redis (one GET when it is still
   * fresh there) instead of serving it. Its fail-safe fallback is kept, and so are its old
   * deadlines, for `trustAgain` when Redis cannot be asked. The hit path is unchanged.
   */
  suspectAll(now: number): void {
    for (const entry of this.lru.values()) {
      if (!this.suspects.has(entry))
        this.suspects.set(entry, { freshUntil: entry.freshUntil, graceUntil: entry.graceUntil })
      entry.freshUntil = Math.min(entry.freshUntil, now)
      entry.graceUntil = Math.min(entry.graceUntil, now)
    }
  }

  /**
   * Redis could not be asked about `key`'s suspect entry: give it back the deadlines it had,
   * as if nothing had been missed (nothing better is known during an outage). Undefined when
   * the entry is not suspect.
   */
  trustAgain(key: string): Entry | undefined {
    const entry = this.lru.get(key)
    const kept = entry && this.suspects.get(entry)
    if (!entry || !kept) return undefined
    this.suspects.delete(entry)
    entry.freshUntil = kept.freshUntil
    entry.graceUntil = kept.graceUntil
    return entry
  }

  /** Bytes held (encoded lengths), for tests and stats. */
  get bytes(): number {
    return this.lru.calculatedSize
  }

  delete(key: string): void {
    this.lru.delete(key)
  }

  /** The keys held now (a namespace's clear drops those of its old generation). */
  keys(): IterableIterator<string> {
    return this.lru.keys()
  }

  clear(): void {
    this.lru.clear()
  }
}
