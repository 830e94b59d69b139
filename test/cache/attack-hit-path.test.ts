/**
 * Attacks on the Redis hit path (issue 8): one shared in-flight timer, GET/MGET batching of
 * fresh reads, the promise-free resolve(). Against a real redis-server, paused, slept, or
 * with its connection killed mid-batch: every call settles, typed or served, each caller
 * with the value of its own key, and no unhandled rejection.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { freshKeyOf } from '../../src/cache/redis/keys.js'
import { redisAvailable, type RedisServer } from '../support/redis.js'
import { useRedisPerTest } from '../support/redis-suite.js'
import { sleep } from '../support/timing.js'

const NS = 'atk'
const TIMEOUT_MS = 300
/** Generous: the event loop on a shared 2-core machine. */
const SLACK_MS = 700

describe.skipIf(!redisAvailable)('the Redis hit path under attack', () => {
  const caches: Cache[] = []
  const redis = useRedisPerTest(() => Promise.all(caches.splice(0).map((cache) => cache.close())))
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  beforeEach(() => {
    unhandled.length = 0
    process.on('unhandledRejection', onUnhandled)
  })
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled)
  })

  function cache(server: RedisServer, options: Partial<CacheOptions> = {}): Cache {
    const created = createCache({
      redis: server.client({ maxRetriesPerRequest: null }),
      namespace: NS,
      ttl: '60s',
      redisTimeout: TIMEOUT_MS,
      l1: false,
      ...options,
    })
    caches.push(created)
    return created
  }

  /** Loads `count` keys k0..k{count-1}, each valued `v:<key>`. */
  async function fill(c: Cache, count: number): Promise<void> {
    await Promise.all(Array.from({ length: count }, (_, i) => c.getOrLoad(`k${i}`, async () => `v:k${i}`)))
  }

  /** A call, timed from its start; never rejects (the outcome says how it ended). */
  function timed(
    c: Cache,
    key: string,
    loader: () => Promise<string>,
  ): Promise<{ key: string; ms: number; value?: unknown; error?: unknown }> {
    const start = performance.now()
    return c.getOrLoad(key, loader).then(
      (value) => ({ key, ms: performance.now() - start, value }),
      (error: unknown) => ({ key, ms: performance.now() - start, error }),
    )
  }

  it('SIGSTOP mid-burst: a read sent alone before a burst times out on its own deadline, the burst on theirs', async () => {
    const server = await redis.start()
    const c = cache(server, { circuitBreaker: { threshold: 1000 } })
    await fill(c, 40)
    server.pause()
    try {
      let loads = 0
      const loader = (key: string) => async () => {
        loads++
        return `v:${key}`
      }
      const early = timed(c, 'k0', loader('k0'))
      await sleep(150)
      const burst = Array.from({ length: 39 }, (_, i) => timed(c, `k${i + 1}`, loader(`k${i + 1}`)))
      const first = await early
      const rest = await Promise.all(burst)
      for (const outcome of [first, ...rest]) {
        // Redis failing never turns an answerable call into an error: the loader answers.
        expect(outcome.error, outcome.key).toBeUndefined()
        expect(outcome.value).toBe(`v:${outcome.key}`)
        expect(outcome.ms, outcome.key).toBeGreaterThanOrEqual(TIMEOUT_MS - 5)
        expect(outcome.ms, outcome.key).toBeLessThan(TIMEOUT_MS + SLACK_MS)
      }
      expect(loads).toBe(40)
    } finally {
      server.resume()
    }
    expect(unhandled).toEqual([])
  })

  it('DEBUG SLEEP past redisTimeout: late MGET replies to mixed hit/miss/corrupt/foreign keys give no wrong value, no double settle', async () => {
    const server = await redis.start()
    const c = cache(server, { circuitBreaker: { threshold: 1000 } })
    await fill(c, 48)
    const admin = server.client()
    // k0..k11 hit; k12..k23 miss (deleted entirely); k24..k35 corrupt fresh copies; k36..k47 foreign type.
    for (let i = 12; i < 24; i++) await admin.del(freshKeyOf(NS, `k${i}`), `${NS}:{k:k${i}}`)
    for (let i = 24; i < 36; i++) await admin.set(freshKeyOf(NS, `k${i}`), 'garbage|not|a|record')
    for (let i = 36; i < 48; i++) {
      await admin.del(freshKeyOf(NS, `k${i}`))
      await admin.lpush(freshKeyOf(NS, `k${i}`), 'planted')
    }
    const timeouts: string[] = []
    c.on('redis-error', ({ operation, error }) => {
      if (/timed out/.test((error as Error).message)) timeouts.push(operation)
    })
    const sleeper = server.client()
    const slept = sleeper.call('DEBUG', 'SLEEP', '1') // the server answers nothing for 1 s
    await sleep(50)
    const settled = new Map<string, number>()
    const calls = Array.from({ length: 48 }, (_, i) => {
      const key = `k${i}`
      return timed(c, key, async () => `v:${key}`).then((outcome) => {
        settled.set(key, (settled.get(key) ?? 0) + 1)
        return outcome
      })
    })
    const outcomes = await Promise.all(calls)
    await slept
    expect(timeouts).toContain('mget') // the batch was in flight when the sleep began, and timed out
    for (const outcome of outcomes) {
      expect(outcome.error, outcome.key).toBeUndefined()
      expect(outcome.value, outcome.key).toBe(`v:${outcome.key}`)
      expect(outcome.ms, outcome.key).toBeLessThan(TIMEOUT_MS + SLACK_MS)
    }
    // The late replies arrive now: nothing more must settle, nothing must reject unhandled.
    await sleep(300)
    expect([...settled.values()].every((n) => n === 1)).toBe(true)
    expect(unhandled).toEqual([])
    // Once Redis answers again, the same mixed batch is served, each caller its own key's value.
    const again = await Promise.all(Array.from({ length: 48 }, (_, i) => c.getOrLoad(`k${i}`, async () => `v:k${i}`)))
    expect(again).toEqual(Array.from({ length: 48 }, (_, i) => `v:k${i}`))
  })

  it('mixed hit/miss/corrupt/foreign keys in one MGET batch: each caller gets its own key, loaders run only for the misses', async () => {
    const server = await redis.start()
    const c = cache(server)
    await fill(c, 64)
    const admin = server.client()
    const kind = (i: number) => ['hit', 'miss', 'corrupt', 'foreign'][i % 4]!
    for (let i = 0; i < 64; i++) {
      const fresh = freshKeyOf(NS, `k${i}`)
      if (kind(i) === 'miss') await admin.del(fresh, `${NS}:{k:k${i}}`)
      if (kind(i) === 'corrupt') await admin.set(fresh, Buffer.from([0xff, 0x00, 0x7c, 0x7c]))
      if (kind(i) === 'foreign') {
        await admin.del(fresh)
        await admin.sadd(fresh, 'planted')
      }
    }
    await admin.config('RESETSTAT')
    const loaded: string[] = []
    // Twice in one tick per key: the second joins the flight.
    const values = await Promise.all(
      Array.from({ length: 128 }, (_, j) => {
        const key = `k${j % 64}`
        return c.getOrLoad(key, async () => {
          loaded.push(key)
          return `new:${key}`
        })
      }),
    )
    values.forEach((value, j) => {
      const i = j % 64
      expect(value, `k${i}`).toBe(kind(i) === 'miss' ? `new:k${i}` : `v:k${i}`)
    })
    expect(loaded.sort()).toEqual(
      Array.from({ length: 64 }, (_, i) => i)
        .filter((i) => kind(i) === 'miss')
        .map((i) => `k${i}`)
        .sort(),
    )
    const stats = await admin.info('commandstats')
    expect(stats).toMatch(/cmdstat_mget:calls=\d+/) // they did batch
  })

  it('CLIENT KILL with MGETs in flight: every caller settles with its own key, no unhandled rejection', async () => {
    const server = await redis.start()
    const c = cache(server, { circuitBreaker: { threshold: 1000 } })
    await fill(c, 64)
    const admin = server.client()
    const sleeper = server.client()
    const errors: string[] = []
    c.on('redis-error', ({ operation, error }) => errors.push(`${operation}: ${(error as Error).message}`))
    const slept = sleeper.call('DEBUG', 'SLEEP', '0.3')
    await sleep(30)
    const outcomes = Promise.all(Array.from({ length: 64 }, (_, i) => timed(c, `k${i}`, async () => `v:k${i}`)))
    // Queued behind the sleep with the reads: kills the cache's connection (not admin's or sleeper's).
    const killed = admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    for (const outcome of await outcomes) {
      expect(outcome.error, outcome.key).toBeUndefined()
      expect(outcome.value, outcome.key).toBe(`v:k${outcome.key.slice(1)}`)
      expect(outcome.ms, outcome.key).toBeLessThan(1000 + TIMEOUT_MS + SLACK_MS)
    }
    await slept.catch(() => {})
    await killed.catch(() => {})
    await sleep(200)
    // The kill did land mid-batch: reads were failed as a lost connection, not answered.
    expect(
      errors.some((e) => /^m?get: .*connection lost/.test(e)),
      errors.join('\n'),
    ).toBe(true)
    expect(unhandled).toEqual([])
  })

  it('a listener on hit that throws synchronously breaks no call, in a batch or alone', async () => {
    const server = await redis.start()
    const c = cache(server)
    await fill(c, 32)
    let hits = 0
    c.on('hit', () => {
      hits++
      throw new Error('listener bug')
    })
    expect(await c.getOrLoad('k0', async () => 'other')).toBe('v:k0')
    const values = await Promise.all(Array.from({ length: 32 }, (_, i) => c.getOrLoad(`k${i}`, async () => 'other')))
    expect(values).toEqual(Array.from({ length: 32 }, (_, i) => `v:k${i}`))
    expect(hits).toBe(33)
    const local = cache(server, { l1: {} })
    expect(await local.getOrLoad('k1', async () => 'other')).toBe('v:k1')
    local.on('hit', () => {
      throw new Error('listener bug')
    })
    expect(await local.getOrLoad('k1', async () => 'other')).toBe('v:k1') // the L1 hit
    expect(unhandled).toEqual([])
  })

  it('10k concurrent hits on 1k keys through maxInFlight 2: all served from Redis, no loader, bounded commands', async () => {
    const server = await redis.start()
    const c = cache(server, { redisCommands: { maxInFlight: 2 } })
    await fill(c, 1000)
    const admin = server.client()
    await admin.config('RESETSTAT')
    let loads = 0
    const values = await Promise.all(
      Array.from({ length: 10_000 }, (_, j) =>
        c.getOrLoad(`k${j % 1000}`, async () => {
          loads++
          return 'other'
        }),
      ),
    )
    values.forEach((value, j) => expect(value).toBe(`v:k${j % 1000}`))
    expect(loads).toBe(0)
    const stats = await admin.info('commandstats')
    const calls = (name: string) => Number(stats.match(new RegExp(`cmdstat_${name}:calls=(\\d+)`))?.[1] ?? 0)
    // One read per flight (1k flights), each holding a slot: at most 2 keys a round trip, no script.
    expect(calls('get') + calls('mget')).toBeGreaterThanOrEqual(500)
    expect(calls('get') + calls('mget')).toBeLessThanOrEqual(1000)
    expect(calls('evalsha') + calls('eval')).toBe(0)
    expect(unhandled).toEqual([])
  })

  it('a busy event loop past redisTimeout delays the replies of reads in flight, it does not lose them', async () => {
    const server = await redis.start()
    const c = cache(server)
    await fill(c, 40)
    const errors: string[] = []
    c.on('redis-error', ({ operation }) => errors.push(operation))
    let loads = 0
    const loader = async () => {
      loads++
      return 'other'
    }
    const alone = c.getOrLoad('k0', loader) // sent at once, as a GET
    const batch = Array.from({ length: 39 }, (_, i) => c.getOrLoad(`k${i + 1}`, loader)) // MGETs, next tick
    // Once they are sent, Redis answers at once and we read the replies only after the deadlines have passed.
    setImmediate(() => {
      const until = performance.now() + TIMEOUT_MS + 500
      while (performance.now() < until) {
        /* busy */
      }
    })
    expect(await Promise.all([alone, ...batch])).toEqual(Array.from({ length: 40 }, (_, i) => `v:k${i}`))
    expect(loads).toBe(0)
    expect(errors).toEqual([])
  })

  it('a lone GET of a fresh copy of a foreign type is a corrupt copy, not an outage; a hit listener that closes the cache mid-MGET strands no caller', async () => {
    const server = await redis.start()
    const c = cache(server)
    await fill(c, 16)
    const admin = server.client()
    await admin.del(freshKeyOf(NS, 'k0'))
    await admin.hset(freshKeyOf(NS, 'k0'), 'planted', '1')
    const errors: string[] = []
    const corrupt: string[] = []
    c.on('redis-error', ({ operation }) => errors.push(operation))
    c.on('corrupt', ({ key }) => corrupt.push(key))
    expect(await c.getOrLoad('k0', async () => 'other')).toBe('v:k0') // alone: a GET, answered WRONGTYPE
    expect(errors).toEqual([])
    expect(corrupt).toContain('k0')
    let closing: Promise<void> | undefined
    c.on('hit', () => {
      closing ??= c.close()
    })
    const outcomes = await Promise.all(Array.from({ length: 16 }, (_, i) => timed(c, `k${i}`, async () => `v:k${i}`)))
    for (const outcome of outcomes) {
      if (outcome.error === undefined) expect(outcome.value, outcome.key).toBe(`v:${outcome.key}`)
      else expect(outcome.error, outcome.key).toBeInstanceOf(Error)
      expect(outcome.ms, outcome.key).toBeLessThan(TIMEOUT_MS + SLACK_MS)
    }
    await closing
    expect(unhandled).toEqual([])
  })

  it('close() with reads in flight on a paused Redis: calls and close() settle, typed or served', async () => {
    const server = await redis.start()
    const c = cache(server, { circuitBreaker: { threshold: 1000 } })
    await fill(c, 20)
    server.pause()
    try {
      const outcomes = Promise.all(Array.from({ length: 20 }, (_, i) => timed(c, `k${i}`, async () => `v:k${i}`)))
      await sleep(20)
      const start = performance.now()
      const closed = c.close()
      for (const outcome of await outcomes) {
        if (outcome.error !== undefined) expect(outcome.error, outcome.key).toBeInstanceOf(Error)
        else expect(outcome.value, outcome.key).toBe(`v:${outcome.key}`)
        expect(outcome.ms, outcome.key).toBeLessThan(TIMEOUT_MS + SLACK_MS)
      }
      await closed
      expect(performance.now() - start).toBeLessThan(TIMEOUT_MS + SLACK_MS)
    } finally {
      server.resume()
    }
    expect(unhandled).toEqual([])
  })
})

describe.skipIf(!redisAvailable)("L1 never outlives Redis's copy", () => {
  const caches: Cache[] = []
  const redis = useRedisPerTest(() => Promise.all(caches.splice(0).map((cache) => cache.close())))

  it('not even after a clock sample whose reply sat behind a busy event loop', async () => {
    const server = await redis.start()
    const make = (options: Partial<CacheOptions> = {}) => {
      const created = createCache({
        redis: server.client(),
        namespace: NS,
        ttl: '2s',
        ttlJitter: 0,
        redisTimeout: 5000,
        ...options,
      })
      caches.push(created)
      return created
    }
    const writer = make({ l1: false })
    const reader = make()
    await reader.ready()
    const admin = server.client()
    // Bait: the fresh copy is corrupt, the entry is not, so the reader's lookup is one script (a sample of the server clock) and a hit.
    await writer.getOrLoad('bait', async () => 'b')
    await admin.set(freshKeyOf(NS, 'bait'), 'garbage')
    let blocked = false
    reader.on('corrupt', () => {
      if (blocked) return
      blocked = true
      // Runs once the script is sent (lookUp sends it in this reaction): Redis answers at once,
      // and the reply is read 1 s later, as behind any busy moment of a real process.
      queueMicrotask(() => {
        const until = performance.now() + 1000
        while (performance.now() < until) {
          /* busy */
        }
      })
    })
    expect(await reader.getOrLoad('bait', async () => 'other')).toBe('b')
    expect(blocked).toBe(true)

    await writer.getOrLoad('x', async () => 'x1')
    await sleep(1000)
    expect(await reader.getOrLoad('x', async () => 'other')).toBe('x1') // a Redis hit, kept in L1
    // Until Redis's fresh copy is gone (bounded)...
    const fresh = freshKeyOf(NS, 'x')
    for (let i = 0; i < 300 && (await admin.exists(fresh)) === 1; i++) await sleep(5)
    expect(await admin.exists(fresh)).toBe(0)
    // ...after which L1 must not serve it as a hit either.
    const tiers: string[] = []
    reader.on('hit', ({ tier }) => tiers.push(tier))
    await reader.getOrLoad('x', async () => 'x2')
    expect(tiers).not.toContain('l1')
  })
})
