import { randomBytes } from 'node:crypto'
import { entryKeys, type EntryKeys } from '../redis/keys.js'
import type { Broadcast, CommitRequest, RedisStore } from '../redis/store.js'
import { tagChannel, type TagRefusal, type TagStore } from '../redis/tags.js'

/**
 * The cache's side of tags (docs/tags.md): the commit of a tagged value, and
 * deleteByTag's scan of a tag's members. The Redis side is src/redis/tags.ts and its
 * scripts; this process's L1 side is src/memory/tag-index.ts.
 */

/** Members read per SSCAN step of an invalidation, and so invalidated at once. */
export const TAG_SCAN_BATCH = 256

/** What a tagged commit needs besides the commit itself. */
export interface TaggedCommit {
  tags: readonly string[]
  /** Server ms when the load began (a claim's lookup, or an estimate no later than the real start). */
  startedAt: number
  maxKeysPerTag: number
  clockSkew: number
  lease: number
  retentionMs: number
}

/**
 * Enrolls the key under each tag, then commits (fenced), in that order: an invalidation
 * whose drain came after the enrollment finds the key among the tag's members and fences
 * or deletes it; one whose drain came before is seen by the enrollment, which refuses a
 * load that began before it. A commit without a token would take a new one at commit
 * time, above the fence of an invalidation in between: it takes one before enrolling.
 */
export async function commitTagged(store: RedisStore, tags: TagStore, keys: EntryKeys, key: string, request: CommitRequest, tagged: TaggedCommit, broadcast?: Broadcast, undoLate?: number): Promise<{ version: string | undefined; refused?: TagRefusal }> {
  let token = request.token
  if (token === '') token = (await store.getOrLock(keys, randomBytes(16).toString('hex'), tagged.lease, 'token', tagged.retentionMs)).lockArg
  const refused = await tags.enroll(tagged.tags, key, {
    startedAt: tagged.startedAt - tagged.clockSkew,
    // The entry hash lives until its fallback-until; the skew covers the entry's node running ahead.
    lifeMs: Math.max(request.graceMs, request.fallbackMs, request.freshMs) + tagged.clockSkew,
    maxMembers: tagged.maxKeysPerTag,
  })
  if (refused) return { version: undefined, refused }
  return { version: await store.commit(keys, { ...request, token }, broadcast, undoLate) }
}

/** What invalidating one tag needs from the cache. */
export interface TagInvalidation {
  namespace: string
  /** The cache's id, which its own listener ignores. */
  id: string
  retentionMs: number
  /** Drops a member from this process's L1 (and detaches its flight), before Redis is told. */
  forget(key: string): void
  /** The per-key invalidation published with each member's delete. */
  keyMessage(key: string): Broadcast
}

/**
 * deleteByTag for one tag in Redis: (1) the drain (`at` = now, members moved, tag
 * broadcast), (2) SSCAN the drain, (3) each member deleted as `delete()` does (fence bump,
 * tombstone, per-key broadcast), a batch at a time, then removed from the drain. Rejects
 * with `RedisUnavailableError` when any step fails: the members not yet done stay in the
 * drain, and the next deleteByTag of the tag does them.
 */
export async function invalidateTag(store: RedisStore, tags: TagStore, tag: string, how: TagInvalidation): Promise<void> {
  await tags.drain(tag, how.retentionMs, { channel: tagChannel(how.namespace), message: `${how.id}|${tag}` })
  let cursor = '0'
  do {
    const [next, members] = await tags.scan(tag, cursor, TAG_SCAN_BATCH)
    if (members.length > 0) {
      for (const key of members) how.forget(key)
      await Promise.all(members.map((key) => store.invalidate(entryKeys(how.namespace, key), how.retentionMs, how.keyMessage(key))))
      await tags.drained(tag, members)
    }
    cursor = next
  } while (cursor !== '0')
}
