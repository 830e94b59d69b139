/** Past this many remembered invalidations, they are folded into one floor (see `invalidatedSince`). */
const MAX_REMEMBERED_INVALIDATIONS = 10_000

/**
 * This process's knowledge of tags in L1: which L1 entries carry which tag (for entries
 * this process loaded or set, the only ones whose tags it knows), and when each tag was
 * last invalidated here (in the cache's `deletions` count), so a load that began before
 * cannot put its value into L1 afterwards.
 *
 * Entries other processes loaded reach L1 without their tags; they are dropped by the
 * per-key invalidations that deleteByTag publishes for every member (docs/tags.md).
 * Bounded with L1: at most `max` keys (L1's `max`); adding one past it evicts the oldest,
 * which the caller drops from L1 too, so no tagged L1 entry goes untracked.
 */
export class TagIndex {
  private readonly byTag = new Map<string, Set<string>>()
  /** In insertion order: the first is the oldest. */
  private readonly byKey = new Map<string, readonly string[]>()
  private readonly invalidations = new Map<string, number>()
  /** Every tag counts as invalidated at this epoch (the remembered ones overflowed then). */
  private floor = -1

  constructor(private readonly max: number) {}

  /** Records `key`'s tags; returns the key evicted to make room, if any (drop it from L1). */
  add(key: string, tags: readonly string[]): string | undefined {
    this.remove(key)
    let evicted: string | undefined
    if (this.byKey.size >= this.max) {
      evicted = this.byKey.keys().next().value
      if (evicted !== undefined) this.remove(evicted)
    }
    this.byKey.set(key, tags)
    for (const tag of tags) {
      let keys = this.byTag.get(tag)
      if (!keys) this.byTag.set(tag, (keys = new Set()))
      keys.add(key)
    }
    return evicted
  }

  remove(key: string): void {
    const tags = this.byKey.get(key)
    if (!tags) return
    this.byKey.delete(key)
    for (const tag of tags) {
      const keys = this.byTag.get(tag)
      keys?.delete(key)
      if (keys?.size === 0) this.byTag.delete(tag)
    }
  }

  /** `tag` was invalidated at `epoch`: the keys that carried it, now out of the index. */
  invalidate(tag: string, epoch: number): string[] {
    if (this.invalidations.size >= MAX_REMEMBERED_INVALIDATIONS) {
      this.invalidations.clear()
      this.floor = epoch
    }
    this.invalidations.delete(tag) // re-inserted last: the map stays in epoch order
    this.invalidations.set(tag, epoch)
    const keys = [...(this.byTag.get(tag) ?? [])]
    for (const key of keys) this.remove(key)
    return keys
  }

  /** The keys indexed under `tag` now (they stay indexed). */
  keysOf(tag: string): string[] {
    return [...(this.byTag.get(tag) ?? [])]
  }

  /** Was any of `tags` invalidated after `epoch` (a call's start)? */
  invalidatedSince(tags: readonly string[], epoch: number): boolean {
    if (this.floor > epoch) return true
    for (const tag of tags) if ((this.invalidations.get(tag) ?? -1) > epoch) return true
    return false
  }

  /** Keys indexed now (tests and budgets). */
  get size(): number {
    return this.byKey.size
  }
}
