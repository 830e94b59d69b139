import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'
import { gate, sleep, until } from '../support/timing.js'

/** Bursts counted, not timed: loader runs, Redis errors and breaker openings (timings are in `npm run bench:pressure`). */
describe.skipIf(!redisAvailable)('under a burst', () => {
  const suite = useCacheSuite({ ttl: '1h' })
  const cache = suite.cache
  let admin: Redis
  beforeAll(() => {
    admin = suite.admin()
  })

  it('concurrent Redis hits over many stored keys run no loader and never open the breaker', async () => {
    const KEYS = 10_000
    const CALLS = 20_000
    const seeder = cache({ l1: false })
    for (let from = 0; from < KEYS; from += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, i) => seeder.set(`item:${from + i}`, { id: from + i })))
    }
    const reader = cache({ l1: false })
    let loads = 0
    const loader = async () => (loads++, { id: -1 })
    await reader.getOrLoad('item:0', loader) // connected, scripts loaded
    const values = await Promise.all(
      Array.from({ length: CALLS }, (_, i) => reader.getOrLoad(`item:${i % KEYS}`, loader)),
    )
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
    const values = await Promise.all(
      ['a', 'b', 'c'].map((key) => reader.getOrLoad(key, async () => (loaded.push(key), `loaded-${key}`))),
    )
    expect(values).toEqual(['stored-a', 'stored-b', 'loaded-c']) // one sent, one queued, one refused
    expect(loaded).toEqual(['c'])
    expect(reader.stats()['redis-error']).toBeGreaterThanOrEqual(1) // the refusal (and maybe c's commit, refused likewise)
    expect(reader.stats()['circuit-open']).toBe(0)
  })

  it("a joined caller's waitTimeout does not run out while its flight's own Redis lookup is pending", async () => {
    const seeder = cache({ l1: false })
    await seeder.set('slow', 'stored')
    const reader = cache({ l1: false, waitTimeout: 50, redisTimeout: '10s' })
    await reader.getOrLoad('warm', async () => 'connected')
    const sleeper = suite.client()
    await sleeper.ping()
    const asleep = sleeper.call('DEBUG', 'SLEEP', '1')
    // The server is asleep once a probe goes unanswered for a while (it is answered after the sleep).
    let probe = admin.ping()
    for (const deadline = Date.now() + 1_000; Date.now() < deadline; probe = admin.ping()) {
      if (await Promise.race([probe.then(() => false), sleep(100).then(() => true)])) break
    }
    let loads = 0
    const values = await Promise.all(
      Array.from({ length: 5 }, () => reader.getOrLoad('slow', async () => (loads++, 'loaded'))),
    )
    await asleep
    expect(values).toEqual(Array(5).fill('stored'))
    expect(loads).toBe(0) // the 4 joined callers did not give up on a lookup that was only slow
  })

  it('ttlJitter shortens each stored ttl by a random fraction, so keys stored together expire apart', async () => {
    const c = cache({ ttl: '10s', ttlJitter: 0.5 })
    const before = Number((await admin.time())[0]) * 1000
    await Promise.all(Array.from({ length: 50 }, (_, i) => c.set(`j:${i}`, i)))
    const freshUntil = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => Number(await admin.hget(`sg:{k:j:${i}}`, 'x'))),
    )
    for (const at of freshUntil) {
      expect(at - before).toBeGreaterThanOrEqual(5_000 - 1_000) // never shorter than half, 1 s slack for the clock's seconds
      expect(at - before).toBeLessThanOrEqual(10_000 + 1_000)
    }
    expect(new Set(freshUntil).size).toBeGreaterThan(10)
  })
})

describe('background refreshes', () => {
  it('at most maxBackgroundRefreshes run at once, and each key is still refreshed once', async () => {
    const cache = createCache({ ttl: 50, staleTtl: '1m', maxBackgroundRefreshes: 4, ttlJitter: 0 })
    const keys = Array.from({ length: 40 }, (_, i) => `r:${i}`)
    await Promise.all(keys.map((key) => cache.getOrLoad(key, async () => 'old')))
    await sleep(80) // every key is in grace now
    const refreshed = new Map<string, number>()
    let running = 0
    let peak = 0
    const held = gate()
    const refresh = async (context: { key: string; background: boolean; cacheFor(l: { ttl: string }): void }) => {
      expect(context.background).toBe(true)
      refreshed.set(context.key, (refreshed.get(context.key) ?? 0) + 1)
      peak = Math.max(peak, ++running)
      await held.promise
      running--
      context.cacheFor({ ttl: '1h' }) // stays fresh: one refresh per key is the point
      return 'new'
    }
    const first = await Promise.all(keys.map((key) => cache.getOrLoad(key, refresh)))
    expect(first.every((value) => value === 'old')).toBe(true) // stale at once, whatever the cap
    await until(() => running === 4, 'the first refreshes to start') // background loaders start after their callers are answered
    await sleep(20)
    expect(running).toBe(4) // and no more
    held.open()
    await until(async () => {
      const values = await Promise.all(keys.map((key) => cache.getOrLoad(key, refresh)))
      return values.every((value) => value === 'new')
    }, 'every key to be refreshed')
    expect(peak).toBe(4)
    expect([...refreshed.values()].every((count) => count === 1)).toBe(true)
    expect(refreshed.size).toBe(40)
    await cache.close()
  })
})
