/**
 * Attack on "every key the library writes has a TTL", through the writers the plain flood of
 * keys-expire.test.ts does not use: tags (members and tag sets), expire() and expireByTag(),
 * deleteByTag(), namespaces and their clear(), a clearable cache's clear(), and durable deletes.
 * Each of them races loads and sets of the same keys on two connections, with ttls short enough
 * to expire while the scripts run; then every key in Redis is scanned for its PTTL. Only the
 * generation counters of clear() (documented as kept without expiry) may have none.
 */
import { describe, expect, it } from 'vitest'
import { createCache, RemoteLoaderError, type Cache } from '../../../src/index.js'
import { redisAvailable } from '../../support/redis.js'
import { useRedisServer } from '../../support/redis-suite.js'

const KEYS = 3_000
const CONCURRENCY = 500

describe.skipIf(!redisAvailable)('keys without a TTL: tags, expire, namespaces, clear, durable deletes', () => {
  const caches: Cache[] = []
  const suite = useRedisServer({
    flush: true,
    cleanup: () => Promise.all(caches.splice(0).map((cache) => cache.close())),
  })

  function cache(): Cache {
    const made = createCache({
      redis: suite.client(),
      ttl: 40,
      staleTtl: 20,
      negativeTtl: 30,
      l1: false,
      clearable: true,
      maxWaits: 100_000,
      waitTimeout: '30s',
      durableDeletes: { default: 'queue' },
    })
    caches.push(made)
    return made
  }

  async function operate(a: Cache, b: Cache, i: number): Promise<void> {
    const ttl = 1 + (i % 7) * 3
    const key = `k${i}`
    const tag = `t${i % 13}`
    const ns = (c: Cache) => c.namespace(`n${i % 5}`)
    const load = (c: Pick<Cache, 'getOrLoad'>) =>
      c
        .getOrLoad(
          key,
          async (context) => {
            if (i % 3 === 0) context.cacheFor({ ttl, staleTtl: i % 2 })
            return `v${i}`
          },
          { tags: [tag, `u${i % 3}`] },
        )
        .catch((error: unknown) => {
          if (!(error instanceof RemoteLoaderError)) throw error
        })
    switch (i % 8) {
      case 0:
        await Promise.all([load(a), b.expire(key), load(b)])
        return
      case 1:
        await Promise.all([load(a), b.expireByTag(tag), load(b)])
        return
      case 2:
        await Promise.all([load(a), b.deleteByTag(tag), a.set(key, 's', { ttl, tags: [tag] })])
        return
      case 3:
        await Promise.all([load(ns(a)), load(ns(b)), ns(b).delete(key)])
        return
      case 4:
        await Promise.all([load(ns(a)), i % 40 === 4 ? ns(b).clear() : load(ns(b))])
        return
      case 5:
        await Promise.all([load(a), b.delete(key, { durable: 'queue' }), load(b)])
        return
      case 6:
        await Promise.all([load(a), i % 100 === 6 ? b.clear() : b.expire(key)])
        return
      default:
        await Promise.all([load(a), load(b)])
        await new Promise((resolve) => setTimeout(resolve, ttl))
        await Promise.all([load(b), a.deleteByTags([tag, `u${i % 3}`])])
    }
  }

  it(`${KEYS} keys through tags, expire, expireByTag, namespaces, clear and durable deletes leave 0 keys without TTL but clear()'s generation counters`, async () => {
    const a = cache()
    const b = cache()
    await Promise.all([a.ready(), b.ready()])
    let next = 0
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < KEYS) await operate(a, b, next++)
      }),
    )
    await Promise.all([a.close(), b.close()])
    const admin = suite.admin()
    let scanned = 0
    const without: string[] = []
    let cursor = '0'
    do {
      const [nextCursor, keys] = await admin.scan(cursor, 'COUNT', 1000)
      cursor = nextCursor
      scanned += keys.length
      const pttls = await Promise.all(keys.map((key) => admin.pttl(key)))
      keys.forEach((key, j) => {
        if (pttls[j] === -1) without.push(key)
      })
    } while (cursor !== '0')
    expect(scanned).toBeGreaterThan(0)
    // The generation counters clear() raises are kept without expiry by design (docs/namespaces.md):
    // one per name cleared (5 namespaces here, and the cache-wide one), never one per key.
    const generations = without.filter((key) => key.startsWith('sg:__generation:'))
    expect(generations.length).toBeLessThanOrEqual(6)
    const leaked = without.filter((key) => !key.startsWith('sg:__generation:'))
    expect(leaked.slice(0, 20)).toEqual([])
    expect(leaked.length).toBe(0)
  }, 120_000)
})
