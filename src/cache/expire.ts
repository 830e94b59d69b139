import type { Cluster, Redis } from 'ioredis'
import { CacheClosedError } from '../errors.js'
import { checkKey } from '../key.js'
import { keyPrefixOf } from '../redis/keys.js'
import { registerScripts, type ClientWith } from '../redis/scripts.js'
import { checkTags } from '../tag.js'
import type { CacheCore } from './core.js'
import { entryKeys } from './redis/keys.js'
import { tagKeys } from './redis/tags.js'
import { TAG_SCAN_BATCH } from './tags.js'

const EXPIRE_SCRIPTS = { stampedeGuardExpire: { file: 'expire.lua', keys: 2 } } as const

/**
 * Soft invalidation (`cache.expire`, `cache.expireByTag`): a fresh value becomes stale at once
 * without disappearing, so the next caller reloads it (one load across processes: the
 * get-or-lock lock) while every other caller is served it stale within its grace window
 * (`staleTtl`). One expire.lua call per key: fenced by being one script, it changes only the
 * deadlines of the value it finds fresh, so it cannot bring back a deleted value or overwrite
 * a commit; it drops the fresh copy and publishes the key on the invalidation channel, so
 * every process drops its L1 copy (and then finds the value in grace in Redis).
 */
export class Expiry {
  private readonly client: ClientWith<keyof typeof EXPIRE_SCRIPTS> | undefined
  private readonly keyPrefix: string

  /** @internal */
  constructor(
    private readonly core: CacheCore,
    client: Redis | Cluster | undefined,
  ) {
    this.client = client && registerScripts(client, EXPIRE_SCRIPTS, new URL('./redis/scripts/', import.meta.url))
    this.keyPrefix = client ? keyPrefixOf(client) : ''
  }

  /** See `Cache.expire`. */
  async expire(key: string): Promise<boolean> {
    const { core } = this
    if (core.closed) throw new CacheClosedError()
    checkKey(key, core.settings.maxKeyLength)
    return this.expireChecked(key)
  }

  /** See `Cache.expireByTag`: the tag's members (SSCAN of its member set), each expired as `expire` does. */
  async expireByTag(tag: string): Promise<number> {
    const { core } = this
    if (core.closed) throw new CacheClosedError()
    const [checked] = checkTags([tag], 'tag')
    const store = core.store
    if (!store || !this.client) {
      let expired = 0
      for (const key of core.tagIndex.keysOf(checked!)) if (this.expireInMemory(key)) expired++
      return expired
    }
    const { members } = tagKeys(core.settings.namespace, checked!)
    let [cursor, expired] = ['0', 0]
    do {
      const [next, keys] = await store.run('tag-scan', () =>
        this.client!.sscan(members, cursor, 'COUNT', TAG_SCAN_BATCH),
      )
      const done = await store.fanOut(keys, (key) => this.expireChecked(key))
      expired += done.filter(Boolean).length
      cursor = next
    } while (cursor !== '0')
    return expired
  }

  /** L1's copy is dropped here (a flight running keeps its callers, as after a delete); Redis's value made stale. */
  private async expireChecked(key: string): Promise<boolean> {
    const { core } = this
    const store = core.store
    if (!store || !this.client) return this.expireInMemory(key)
    core.forget(key)
    const { channel, message } = core.forgetMessage(key)
    const keys = entryKeys(core.settings.namespace, key)
    const expired = await store.run('expire', () =>
      this.client!.stampedeGuardExpire(keys.entry, keys.fresh, this.keyPrefix + channel, message),
    )
    return expired === 1
  }

  /** Without Redis, L1's copy is the value: it is made stale as expire.lua makes Redis's (grace kept at its length). */
  private expireInMemory(key: string): boolean {
    const entry = this.core.memory?.get(key)
    const now = performance.now()
    if (!entry || now >= entry.freshUntil) return false
    entry.graceUntil = now + (entry.graceUntil - entry.freshUntil)
    entry.freshUntil = now
    this.core.refreshHolds.delete(key)
    return true
  }
}
