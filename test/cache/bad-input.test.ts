import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createCache, InvalidArgumentError, type Cache, type CacheOptions } from '../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { until } from '../support/timing.js'

/** Input a caller or a loader can get wrong, against a real Redis shared by two caches (two "processes"). */
describe.skipIf(!redisAvailable)('bad input', () => {
  let server: RedisServer
  let admin: Redis
  const clients: Redis[] = []
  const caches: Cache[] = []

  beforeAll(async () => {
    server = await startRedis()
    admin = server.client()
  })
  afterAll(async () => {
    await server?.stop()
  })
  afterEach(async () => {
    await Promise.all(caches.splice(0).map((cache) => cache.close()))
    for (const client of clients.splice(0)) client.disconnect()
    await admin.flushall()
  })

  /** A cache on its own connection, as another process would have. */
  function cache(options: Partial<CacheOptions> = {}): Cache {
    const client = server.client()
    clients.push(client)
    const created = createCache({ redis: client, ttl: '1m', ...options })
    caches.push(created)
    return created
  }

  describe('keys that are not well-formed UTF-16', () => {
    it('are rejected, so two lone-surrogate keys cannot share one Redis entry', async () => {
      const a = cache()
      const b = cache()
      const reasons: unknown[] = []
      for (const key of ['z\uD800', 'z\uD801', '\uDC00', 'a\uDBFFb']) {
        reasons.push(await a.getOrLoad(key, async () => 'first').catch((e: unknown) => e))
        reasons.push(await b.getOrLoad(key, async () => 'second').catch((e: unknown) => e))
        reasons.push(await a.set(key, 'set').catch((e: unknown) => e))
        reasons.push(await b.delete(key).catch((e: unknown) => e))
      }
      for (const reason of reasons) {
        expect(reason).toBeInstanceOf(InvalidArgumentError)
        expect((reason as InvalidArgumentError).argument).toBe('key')
      }
      expect(await admin.keys('*')).toEqual([]) // nothing reached Redis
    })

    it('well-formed astral keys stay distinct across processes, and their delete reaches the other process', async () => {
      const a = cache()
      const b = cache()
      expect(await a.getOrLoad('z\u{1F600}', async () => 'grin')).toBe('grin')
      expect(await a.getOrLoad('z\u{1F601}', async () => 'beam')).toBe('beam')
      expect(await b.getOrLoad('z\u{1F600}', async () => 'other')).toBe('grin') // read from Redis, now in b's L1
      expect(await b.getOrLoad('z\u{1F601}', async () => 'other')).toBe('beam')
      await a.delete('z\u{1F600}')
      let seen = 'grin'
      await until(async () => (seen = await b.getOrLoad('z\u{1F600}', async () => 'reloaded')) !== 'grin', "b's L1 to drop the deleted key")
      expect(seen).toBe('reloaded')
      expect(await b.getOrLoad('z\u{1F601}', async () => 'other')).toBe('beam') // its neighbour untouched
    })
  })
})
