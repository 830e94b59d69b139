import type { Cluster, Redis } from 'ioredis'
import { hashTag, keyPrefixOf } from '../../redis/keys.js'
import { registerScripts, type ClientWith } from '../../redis/scripts.js'
import type { Broadcast, RedisStore } from './store.js'

/**
 * The Redis names of one tag. All share the tag's own hash tag (one slot per tag, in
 * general not the slot of any entry it lists): every tag script touches only these.
 */
export interface TagKeys {
  /** Set of the cache keys (as given to getOrLoad) stored with the tag since its last invalidation. */
  members: string
  /** String: server ms of the tag's last invalidation, kept for the longest a load may commit. */
  at: string
  /** Set of the members an invalidation moved out of `members`, emptied as they are invalidated. */
  drain: string
}

/** `<ns>:tag:{t:<tag>}` (or `{th:<sha256>}` for a tag with braces), plus `:keys`, `:at`, `:drain`. */
export function tagKeys(namespace: string, tag: string): TagKeys {
  const base = `${namespace}:tag:${hashTag('t', 'th', tag)}`
  return { members: `${base}:keys`, at: `${base}:at`, drain: `${base}:drain` }
}

/** Channel on which tag invalidations are broadcast, so every process drops its L1 entries carrying the tag. */
export function tagChannel(namespace: string): string {
  return `${namespace}:__tag_invalidations`
}

const TAG_SCRIPTS = {
  stampedeGuardTagEnroll: { file: 'tag-enroll.lua', keys: 2 },
  stampedeGuardTagDrain: { file: 'tag-drain.lua', keys: 3 },
} as const

/** Why a tagged value was not committed: a tag was invalidated after its load began, or a tag's member set is full. */
export type TagRefusal = 'invalidated' | 'full'

/** What a load hands to `enroll`. */
export interface Enrollment {
  /** Server ms when the load began (already less the clock-skew allowance). */
  startedAt: number
  /** How long the entry may live from now, ms. */
  lifeMs: number
  maxMembers: number
}

/**
 * The tag scripts, sent through the store's command budget, timeout and breaker (so a
 * failure is a `RedisUnavailableError`, as for every other command).
 */
export class TagStore {
  private readonly client: ClientWith<keyof typeof TAG_SCRIPTS>
  private readonly keyPrefix: string

  /** @internal */
  constructor(
    client: Redis | Cluster,
    private readonly store: RedisStore,
    private readonly namespace: string,
  ) {
    this.client = registerScripts(client, TAG_SCRIPTS, new URL('./scripts/', import.meta.url))
    this.keyPrefix = keyPrefixOf(client)
  }

  /** Enrolls `key` under each tag (one script per tag, sent together); the first refusal, if any. */
  async enroll(
    tags: readonly string[],
    key: string,
    { startedAt, lifeMs, maxMembers }: Enrollment,
  ): Promise<TagRefusal | undefined> {
    const replies = await this.store.fanOut(tags, (tag) => {
      const { members, at } = tagKeys(this.namespace, tag)
      return this.store.run('tag-enroll', () =>
        this.client.stampedeGuardTagEnroll(members, at, key, Math.floor(startedAt), Math.ceil(lifeMs), maxMembers),
      )
    })
    if (replies.includes(0)) return 'invalidated'
    return replies.includes(-1) ? 'full' : undefined
  }

  /** Step 1 of an invalidation: `at` = now, members moved to the drain, `broadcast` published. */
  async drain(tag: string, retentionMs: number, broadcast: Broadcast): Promise<void> {
    const { members, at, drain } = tagKeys(this.namespace, tag)
    await this.store.run('tag-drain', () =>
      this.client.stampedeGuardTagDrain(
        members,
        at,
        drain,
        retentionMs,
        this.keyPrefix + broadcast.channel,
        broadcast.message,
      ),
    )
  }

  /** One SSCAN step over the drain: the next cursor ('0' at the end) and up to about `count` members. */
  async scan(tag: string, cursor: string, count: number): Promise<[string, string[]]> {
    const { drain } = tagKeys(this.namespace, tag)
    return this.store.run('tag-scan', () => this.client.sscan(drain, cursor, 'COUNT', count))
  }

  /** Members whose entries have been invalidated leave the drain. */
  async drained(tag: string, members: readonly string[]): Promise<void> {
    const { drain } = tagKeys(this.namespace, tag)
    await this.store.run('tag-drained', () => this.client.srem(drain, ...members))
  }
}
