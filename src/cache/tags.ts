import { randomBytes } from 'node:crypto'
import type { EntryKeys } from './redis/keys.js'
import type { Broadcast, CommitRequest, RedisStore } from './redis/store.js'
import { tagChannel, type TagRefusal, type TagStore } from './redis/tags.js'

/**
 * The cache's side of tags (docs/tags.md): the commit of a tagged value, and
 * deleteByTag's scan of a tag's members. The Redis side is src/cache/redis/tags.ts and its
 * scripts; this process's L1 side is src/memory/tag-index.ts.
 */

/** Members read per SSCAN step of an invalidation, and so invalidated at once. */
export const TAG_SCAN_BATCH = 256

/** What a tagged commit needs besides the commit itself. */
export interface TaggedCommit {
  tags: readonly string[]
  /** Server ms when the load began (a claim's lookup, or the clock's estimate); undefined when the server clock was not known. */
  startedAt: number | undefined
  /** performance.now() when the load began (or set() was called). */
  startedLocal: number
  maxKeysPerTag: number
  clockSkew: number
  lease: number
  retentionMs: number
  /** The command timeout: the commit's expiry is set up to this long after the enrollment's. */
  redisTimeout: number
}

/**
 * Enrolls the key under each tag, then commits (fenced), in that order: an invalidation
 * whose drain came after the enrollment finds the key among the tag's members and fences
 * or deletes it; one whose drain came before is seen by the enrollment, which refuses a
 * load that began before it. A commit without a token would take a new one at commit
 * time, above the fence of an invalidation in between: it takes one before enrolling. That
 * lookup's server time, less the local time since the start, is no later than the real
 * start (the clock's estimate may be ahead by half a round trip, or missing): the earlier wins.
 */
export async function commitTagged(
  store: RedisStore,
  tags: TagStore,
  keys: EntryKeys,
  key: string,
  request: CommitRequest,
  tagged: TaggedCommit,
  broadcast?: Broadcast,
  undoLate?: number,
): Promise<{ version: string | undefined; refused?: TagRefusal }> {
  let { token } = request
  let startedAt = tagged.startedAt ?? Infinity
  if (token === '') {
    const lookup = await store.getOrLock(
      keys,
      randomBytes(16).toString('hex'),
      tagged.lease,
      'token',
      tagged.retentionMs,
    )
    token = lookup.lockArg
    startedAt = Math.min(startedAt, lookup.serverNow - (performance.now() - tagged.startedLocal))
  }
  if (startedAt === Infinity) startedAt = 0 // not known at all: refused if the tag was invalidated lately
  const refused = await tags.enroll(tagged.tags, key, {
    startedAt: startedAt - tagged.clockSkew,
    // The entry hash lives until its fallback-until, counted from its commit, which runs after
    // this (a round trip, within redisTimeout): the set must not expire first, or deleteByTag
    // would miss the entry's last moments. The skew covers the entry's node running ahead.
    lifeMs: Math.max(request.graceMs, request.fallbackMs, request.freshMs) + tagged.redisTimeout + tagged.clockSkew,
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
  /** Deletes a member as delete() does, batched with the tick's other deletes (invalidations.ts). */
  invalidate(key: string): Promise<void>
}

/**
 * deleteByTags in Redis: (1) each tag's drain (`at` = now, members moved, tag broadcast),
 * all tags at once; then, a tag at a time, (2) SSCAN its drain, (3) each member deleted as
 * `delete()` does (fence bump, tombstone, broadcast), a batch at a time in one call and one
 * message, then removed from the drain. Every fan-out stays within the command budget (RedisStore.fanOut). Rejects
 * with `RedisUnavailableError` when any step fails: the members not yet done stay in the
 * drain, and the next deleteByTag of the tag does them.
 */
export async function invalidateTags(
  store: RedisStore,
  tags: TagStore,
  tagList: readonly string[],
  how: TagInvalidation,
): Promise<void> {
  await store.fanOut(tagList, (tag) =>
    tags.drain(tag, how.retentionMs, { channel: tagChannel(how.namespace), message: `${how.id}|${tag}` }),
  )
  for (const tag of tagList) {
    let cursor = '0'
    do {
      const [next, members] = await tags.scan(tag, cursor, TAG_SCAN_BATCH)
      if (members.length > 0) {
        for (const key of members) how.forget(key)
        // One script call and one message for the whole step (per slot on a Cluster).
        await Promise.all(members.map((key) => how.invalidate(key)))
        await tags.drained(tag, members)
      }
      cursor = next
    } while (cursor !== '0')
  }
}
