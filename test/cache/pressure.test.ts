import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'

/** Bursts counted, not timed: loader runs, Redis errors and breaker openings (timings are in `npm run bench:pressure`). */
describe.skipIf(!redisAvailable)('under a burst', () => {
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

  function cache(options: Partial<CacheOptions> = {}): Cache {
    const client = server.client()
    clients.push(client)
    const created = createCache({ redis: client, ttl: '1h', ...options })
    caches.push(created)
    return created
  }

  it('concurrent Redis hits over many stored keys run no loader and never open the breaker', async () => {
    const KEYS = 10_000
    const CALLS = 40_000
    const seeder = cache({ l1: false })
    for (let from = 0; from < KEYS; from += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, i) => seeder.set(`item:${from + i}`, { id: from + i })))
    }
    const reader = cache({ l1: false })
    let loads = 0
    const loader = async () => (loads++, { id: -1 })
    await reader.getOrLoad('item:0', loader) // connected, scripts loaded
    const values = await Promise.all(Array.from({ length: CALLS }, (_, i) => reader.getOrLoad(`item:${i % KEYS}`, loader)))
    expect(loads).toBe(0)
    expect(reader.stats()['redis-error']).toBe(0)
    expect(reader.stats()['circuit-open']).toBe(0)
    expect(values.every((value, i) => (value as { id: number }).id === i % KEYS)).toBe(true)
  })

  it('past redisCommands.maxQueued a lookup is refused at once: that call loads in-process, the breaker stays closed', async () => {
    const seeder = cache({ l1: false })
    await Promise.all(['a', 'b', 'c'].map((key) => seeder.set(key, `stored-${key}`)))
    const reader = cache({ l1: false, redisCommands: { maxInFlight: 1, maxQueued: 1 } })
    await reader.getOrLoad('a', async () => 'unused') // connected
    const loaded: string[] = []
    const values = await Promise.all(['a', 'b', 'c'].map((key) => reader.getOrLoad(key, async () => (loaded.push(key), `loaded-${key}`))))
    expect(values).toEqual(['stored-a', 'stored-b', 'loaded-c']) // one sent, one queued, one refused
    expect(loaded).toEqual(['c'])
    expect(reader.stats()['redis-error']).toBeGreaterThanOrEqual(1) // the refusal (and maybe c's commit, refused likewise)
    expect(reader.stats()['circuit-open']).toBe(0)
  })
})
