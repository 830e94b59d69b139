/**
 * Every key the cache writes carries an expiry: a key without one is a leak that never ends.
 * A flood of distinct keys, through two caches (two connections) at once, mixes loads, deletes,
 * sets, loader errors (negative caching) and pass markers, with ttls short enough that keys
 * expire while the scripts that write them run; then every key in Redis is scanned for its PTTL.
 */
import { describe, expect, it } from 'vitest'
import { createCache, RemoteLoaderError, type Cache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'

const ROUNDS = 2
const KEYS_PER_ROUND = 6_000
const CONCURRENCY = 2_000

describe.skipIf(!redisAvailable)('keys without a TTL', () => {
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
      maxWaits: 100_000,
      waitTimeout: '30s',
    })
    caches.push(made)
    return made
  }

  /** One operation on `key`, chosen by `i`: the mix of the flood (a third of them short-lived). */
  async function operate(cache: Cache, other: Cache, key: string, i: number): Promise<void> {
    const ttl = 1 + (i % 7) * 3 // 1..19 ms: expires while the next scripts on it run
    const load = (c: Cache) =>
      c
        .getOrLoad(key, async (context) => {
          if (i % 3 === 0) context.cacheFor({ ttl, staleTtl: i % 2, staleIfError: i % 5 })
          return `v${i}`
        })
        .catch((error: unknown) => {
          // the loader error of case 2, shared by negative caching: expected, and not what is counted here
          if (!(error instanceof RemoteLoaderError)) throw error
        })
    switch (i % 10) {
      case 0: // delete racing a load, and a load after
        await Promise.all([load(cache), other.delete(key)])
        await load(other)
        return
      case 1: // set racing a load and a delete
        await Promise.all([cache.set(key, `s${i}`, { ttl }), load(other), other.delete(key)])
        return
      case 2: // loader errors, kept by negative caching, racing a load
        await Promise.all([
          cache.getOrLoad(key, async () => Promise.reject(new Error('down'))).catch(() => undefined),
          load(other),
        ])
        return
      case 3: // pass markers (hit-for-miss), then a load and a delete
        await cache.getOrLoad(key, async (context) => {
          context.doNotCache({ passFor: ttl })
          return 'pass'
        })
        await Promise.all([load(other), cache.delete(key)])
        return
      default: // two loads on a short-lived value, the second after it may have expired
        await Promise.all([load(cache), load(other)])
        await new Promise((resolve) => setTimeout(resolve, ttl))
        await load(i % 2 ? cache : other)
    }
  }

  it(`${ROUNDS} rounds of ${KEYS_PER_ROUND} keys with deletes, sets, errors and pass markers leave 0 keys without TTL`, async () => {
    const a = cache()
    const b = cache()
    await Promise.all([a.ready(), b.ready()])
    for (let round = 1; round <= ROUNDS; round++) {
      for (let start = 0; start < KEYS_PER_ROUND; start += CONCURRENCY) {
        await Promise.all(
          Array.from({ length: CONCURRENCY }, (_, j) => {
            const i = start + j
            return operate(round % 2 ? a : b, round % 2 ? b : a, `r${round}:${i}`, i)
          }),
        )
      }
    }
    const admin = suite.admin()
    let scanned = 0
    const withoutTtl: string[] = []
    let cursor = '0'
    do {
      const [next, keys] = await admin.scan(cursor, 'COUNT', 1000)
      cursor = next
      if (keys.length === 0) continue
      const pipeline = admin.pipeline()
      for (const key of keys) pipeline.pttl(key)
      const ttls = (await pipeline.exec())!.map(([, ttl]) => ttl as number)
      scanned += keys.length
      keys.forEach((key, i) => {
        if (ttls[i] === -1) withoutTtl.push(key)
      })
    } while (cursor !== '0')
    console.log(`scanned ${scanned} keys, ${withoutTtl.length} without TTL`, withoutTtl.slice(0, 10))
    expect(scanned).toBeGreaterThan(0)
    expect(withoutTtl).toEqual([])
  }, 120_000)
})
