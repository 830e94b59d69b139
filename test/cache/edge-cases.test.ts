import { describe, expect, it } from 'vitest'
import {
  createCache,
  InvalidArgumentError,
  LoaderTimeoutError,
  SerializationError,
  type CacheOptions,
} from '../../src/index.js'
import { redisAvailable, startRedis } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'
import { gate, sleep, until } from '../support/timing.js'
import { cacheParts } from '../../src/cache/cache.js'

describe('timeouts and flights (in-process)', () => {
  it('a load that beats its timeouts reports no timeout', async () => {
    const cache = createCache({ ttl: 10, staleIfError: '1m', softTimeout: 500, hardTimeout: 1_000 })
    await cache.getOrLoad('k', async () => 1)
    await sleep(20)
    expect(await cache.getOrLoadResult('k', async () => 2)).toEqual({ value: 2, outcome: 'loaded' })
    await sleep(1_100)
    expect(cache.stats().timeout).toBe(0)
    expect(cache.stats().stale).toBe(0)
    await cache.close()
  })

  it('after a hardTimeout, later callers join the load still running instead of starting another', async () => {
    const cache = createCache({ ttl: '1m', hardTimeout: 50 })
    let loads = 0
    const running = gate() // the load runs until every caller has timed out, however slow the machine
    const slow = async () => {
      loads++
      await running.promise
      return 'done'
    }
    const outcomes: unknown[] = []
    for (let i = 0; i < 5; i++) {
      outcomes.push(await cache.getOrLoad('k', slow).catch((e: unknown) => e))
    }
    running.open()
    expect(outcomes.every((o) => o instanceof LoaderTimeoutError)).toBe(true)
    expect(loads).toBe(1)
    await cache.close()
    expect(cache.stats().load).toBe(1)
  })

  it('softTimeout alone never invents a hardTimeout error when the fallback runs out', async () => {
    // The fallback (valid until ~530 ms) covers the call but has run out when softTimeout (call + 700 ms) fires.
    const cache = createCache({ ttl: 30, staleIfError: 500, softTimeout: 700 })
    await cache.getOrLoad('k', async () => 'old')
    await sleep(40) // stale, fallback valid for ~490 ms more
    expect(await cache.getOrLoad('k', async () => (await sleep(1_000), 'new'))).toBe('new')
    await cache.close()
  })

  it('lock.maxHold bounds a loader that never settles, and close() does not hang on it', async () => {
    const cache = createCache({ ttl: '1m', lock: { lease: 50, maxHold: 100 } })
    const error = await cache.getOrLoad('stuck', () => new Promise<never>(() => {})).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LoaderTimeoutError)
    expect((error as LoaderTimeoutError).option).toBe('lock.maxHold')
    expect(await cache.getOrLoad('stuck', async () => 'next')).toBe('next')
    await cache.close()
  })

  it('a caller after `await delete()` never receives the value loaded before it', async () => {
    const cache = createCache({ ttl: '1m' })
    let db = 'old'
    let loads = 0
    const firstRead = gate()
    const firstHeld = gate()
    const loader = async () => {
      const read = db
      if (++loads === 1) {
        firstRead.open()
        await firstHeld.promise // still in flight when the delete lands
      }
      return read
    }
    const first = cache.getOrLoad('k', loader)
    await firstRead.promise
    db = 'new'
    await cache.delete('k')
    const after = cache.getOrLoadResult('k', loader)
    firstHeld.open()
    expect(await after).toEqual({ value: 'new', outcome: 'loaded' })
    expect(await first).toBe('old')
    expect(await cache.getOrLoad('k', loader)).toBe('new')
    await cache.close()
  })

  it('early refresh follows the ttl a loader set with cacheFor, without a refresh storm', async () => {
    const cache = createCache({ ttl: '1m', earlyRefresh: 0.8 })
    let loads = 0
    const loader = async (ctx: { cacheFor(o: { ttl: number }): void }) => {
      loads++
      ctx.cacheFor({ ttl: 1_000 })
      return loads
    }
    await cache.getOrLoad('k', loader)
    for (let i = 0; i < 200; i++) await cache.getOrLoad('k', loader)
    expect(loads).toBe(1) // fresh and far from 80% of its own 1 s ttl
    await sleep(850)
    await cache.getOrLoad('k', loader)
    await until(() => cache.stats().load >= 2, 'the early refresh')
    expect(loads).toBe(2)
    await cache.close()
  })

  it('callers joining a hung in-process load are bounded by waitTimeout', async () => {
    const cache = createCache({
      ttl: '1m',
      waitTimeout: 100,
      onWaitTimeout: 'throw',
      lock: { lease: 100, maxHold: 3_000 },
    })
    const hung = cache.getOrLoad('k', () => new Promise<string>(() => {})).catch((e: unknown) => e)
    const started = performance.now()
    const error = await cache.getOrLoad('k', async () => 'unused').catch((e: unknown) => e)
    expect(error).toMatchObject({ code: 'ERR_SG_LOCK_WAIT_TIMEOUT' })
    expect(performance.now() - started).toBeLessThan(2_500) // before lock.maxHold gives the load up
    expect(await hung).toBeInstanceOf(LoaderTimeoutError)
    await cache.close()
  })

  it('a background refresh is flagged and starts only after its caller got the stale value', async () => {
    const cache = createCache({ ttl: 20, staleTtl: '1m' })
    await cache.getOrLoad('k', async () => 'old')
    await sleep(40)
    const seen: boolean[] = []
    let startedBeforeAnswer = true
    const answer = cache.getOrLoad('k', async (ctx) => {
      seen.push(ctx.background)
      return 'new'
    })
    answer.then(() => (startedBeforeAnswer = seen.length > 0))
    expect(await answer).toBe('old')
    await until(() => cache.stats().load >= 2, 'the background refresh') // finished, so stored in L1
    expect(seen).toEqual([true])
    expect(startedBeforeAnswer).toBe(false)
    expect(await cache.getOrLoad('k', async () => 'unused')).toBe('new')
    await cache.close()
  })

  it('a loader whose result cannot be stored (a follower of a private result) is flagged uncached', async () => {
    const cache = createCache({ ttl: '1m' })
    const flags: boolean[] = []
    const followerJoined = gate()
    const leader = cache.getOrLoad('k', async (ctx) => {
      flags.push(ctx.uncached)
      await followerJoined.promise
      ctx.doNotCache({ share: false })
      return 'mine'
    })
    const follower = cache.getOrLoad('k', async (ctx) => {
      flags.push(ctx.uncached)
      return 'theirs'
    })
    await until(() => flags.length === 1, 'the leader to start') // the follower was asked while it ran
    followerJoined.open()
    expect(await Promise.all([leader, follower])).toEqual(['mine', 'theirs'])
    expect(flags).toEqual([false, true])
    await cache.close()
  })

  it('a joined caller whose waitTimeout passes runs its own loader once, bounded by its hardTimeout', async () => {
    const cache = createCache({ ttl: '1m', lock: { lease: 100, maxHold: 5_000 } })
    const leader = gate()
    const led = cache.getOrLoad('x', async () => (await leader.promise, 'leader'))
    let own = 0
    expect(await cache.getOrLoadResult('x', async () => (own++, 'mine'), { waitTimeout: 50 })).toEqual({
      value: 'mine',
      outcome: 'loaded',
    })
    expect(own).toBe(1)
    const error = await cache
      .getOrLoad('x', () => new Promise<string>(() => {}), { waitTimeout: 50, hardTimeout: 200 })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LoaderTimeoutError)
    leader.open()
    expect(await led).toBe('leader')
    await cache.close()
  })

  it('deletes during flights leave no bookkeeping behind', async () => {
    const cache = createCache({ ttl: '1m' })
    for (let i = 0; i < 50; i++) {
      const loading = cache.getOrLoad(`k${i}`, async () => i)
      await cache.delete(`k${i}`)
      await loading
    }
    await cache.close()
    expect(cacheParts(cache).core.deletedAt.size).toBe(0)
  })

  it('set() rejects undefined and unencodable values', async () => {
    const cache = createCache({ ttl: '1m' })
    await expect(cache.set('k', undefined)).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(
      cache.set(
        'k',
        new (class Point {
          x = 1
        })(),
      ),
    ).rejects.toBeInstanceOf(SerializationError)
    await cache.close()
  })

  it.each([
    ['a typo inside lock', { lock: { leaseMs: 100 } }, /^lock\.leaseMs: unknown option/],
    ['a typo inside l1', { l1: { maxSize: 5 } }, /^l1\.maxSize: unknown option/],
    ['a typo inside circuitBreaker', { circuitBreaker: { treshold: 2 } }, /^circuitBreaker\.treshold: unknown option/],
    [
      'pollInterval above maxPollInterval',
      { lock: { pollInterval: 500, maxPollInterval: 100 } },
      /^lock\.maxPollInterval: /,
    ],
    ['maxHold below lease', { lock: { lease: 1000, maxHold: 500 } }, /^lock\.maxHold: /],
    ['negativeTtl without Redis', { negativeTtl: 1000 }, /^negativeTtl: needs Redis/],
    ['l1: false without Redis', { l1: false }, /^l1: cannot be false without redis/],
    [
      'shardedPubSub without a Cluster',
      { shardedPubSub: true },
      /^shardedPubSub: needs redis to be an ioredis Cluster/,
    ],
  ])('rejects %s', (_, options, message) => {
    expect(() => createCache({ ttl: 1000, ...options } as CacheOptions)).toThrow(message)
  })
})

describe.skipIf(!redisAvailable)('deletes and timeouts across caches', () => {
  const suite = useRedisServer()

  async function eventually(read: () => Promise<string>, expected: string): Promise<string> {
    let seen = await read()
    for (const deadline = Date.now() + 5_000; seen !== expected && Date.now() < deadline; await sleep(10))
      seen = await read()
    return seen
  }

  it("a delete from a cache without L1 still reaches other caches' L1", async () => {
    const [rw, rr] = [suite.server().client(), suite.server().client()]
    const writer = createCache({ redis: rw, ttl: '1m', l1: false })
    const reader = createCache({ redis: rr, ttl: '1m' })
    await reader.getOrLoad('k', async () => 'old')
    await writer.delete('k')
    expect(await eventually(() => reader.getOrLoad('k', async () => 'new'), 'new')).toBe('new')
    await Promise.all([writer.close(), reader.close()])
    rw.disconnect()
    rr.disconnect()
  })

  it('deletes reach other caches when the client uses a keyPrefix', async () => {
    const [ra, rb] = [suite.server().client({ keyPrefix: 'app:' }), suite.server().client({ keyPrefix: 'app:' })]
    const a = createCache({ redis: ra, ttl: '1m' })
    const b = createCache({ redis: rb, ttl: '1m' })
    await b.getOrLoad('k', async () => 'old')
    expect(await suite.admin().exists('app:sg:{k:k}')).toBe(1)
    await a.delete('k')
    expect(await eventually(() => b.getOrLoad('k', async () => 'new'), 'new')).toBe('new')
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
  })

  it('a waiter holding a stale value honours softTimeout while another cache loads', async () => {
    const [ra, rb] = [suite.server().client(), suite.server().client()]
    const a = createCache({ redis: ra, ttl: 50, staleIfError: '1m', softTimeout: 100 })
    const b = createCache({ redis: rb, ttl: 50, staleIfError: '1m', softTimeout: 100, l1: false })
    await a.getOrLoad('w', async () => 'old')
    await sleep(80)
    const loading = gate()
    const held = gate() // the load ends only after b has answered
    const leading = a.getOrLoad('w', async () => (loading.open(), await held.promise, 'new'))
    await loading.promise // a holds the lock
    const started = performance.now()
    expect(await b.getOrLoadResult('w', async () => 'unused')).toEqual({ value: 'old', outcome: 'stale' })
    expect(performance.now() - started).toBeLessThan(5_000) // answered at the soft timeout, not after the load
    expect(await leading).toBe('old')
    held.open()
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
  })

  it('a refresh whose copy ran out of grace waits for the other process instead of returning it', async () => {
    const [ra, rb] = [suite.server().client(), suite.server().client()]
    const a = createCache({ redis: ra, ttl: '1m' })
    const b = createCache({ redis: rb, ttl: '1m' })
    const started = gate()
    const held = gate()
    const loading = b.getOrLoad('expired', async () => (started.open(), await held.promise, 'new'))
    await started.promise // b holds the lock
    const expired = {
      value: 'old',
      freshUntil: 0,
      graceUntil: 0,
      fallbackUntil: 0,
      loadMs: 0,
      ttlMs: 60_000,
      backoffUntil: 0,
    }
    const { refresher } = cacheParts(a)
    const refresh = (
      refresher as unknown as { refresh(c: object, m: string, e: object): Promise<{ value: string }> }
    ).refresh.bind(refresher)
    const call = {
      key: 'expired',
      loader: async () => 'unused',
      policy: { ttl: 60_000, waitTimeout: 5_000, onWaitTimeout: 'load', earlyRefresh: { kind: 'off' } },
      epoch: 0,
    }
    const refreshed = refresh(call, 'read', expired)
    // b finishes only once a waits for it (subscribed to the key's channel).
    await until(
      async () => ((await suite.admin().pubsub('NUMSUB', 'sg:{k:expired}:ch')) as [string, number])[1] >= 1,
      'a to wait for b',
    )
    held.open()
    expect((await refreshed).value).toBe('new')
    expect(await loading).toBe('new')
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
  })

  it('a failed grace refresh is retried after failSafeBackoff, not after the lock hold', async () => {
    const redis = suite.server().client()
    const cache = createCache({ redis, ttl: 50, staleTtl: '1m', failSafeBackoff: 200, l1: false })
    let attempts = 0
    let fail = true
    const loader = async () => {
      attempts++
      if (fail && attempts > 1) throw new Error('down')
      return `v${attempts}`
    }
    await cache.getOrLoad('g', loader)
    await sleep(80)
    expect(await cache.getOrLoad('g', loader)).toBe('v1') // stale; refresh fails in the background
    await until(() => cache.stats()['fail-safe'] >= 1, 'the background refresh to fail') // and its backoff recorded
    expect(attempts).toBe(2)
    fail = false
    await sleep(250) // past the backoff
    await cache.getOrLoad('g', loader) // triggers the retry
    expect(await eventually(async () => String(await cache.getOrLoad('g', loader)), 'v3')).toBe('v3')
    await cache.close()
    redis.disconnect()
  })
})

describe.skipIf(!redisAvailable)('deletes racing refreshes and sets', () => {
  const suite = useRedisServer()

  it('an early refresh due when a delete lands is not started with the deleted value', async () => {
    const [ra, rb] = [suite.server().client(), suite.server().client()]
    const a = createCache({ redis: ra, ttl: 1_000, earlyRefresh: 0.5 })
    const b = createCache({ redis: rb, ttl: 1_000, earlyRefresh: 0.5 })
    await a.getOrLoad('k', async () => 'before-delete')
    await sleep(600) // due for early refresh, still fresh
    const read = b.getOrLoad('k', async () => {
      throw new Error('db down')
    }) // b reads Redis: fresh, due
    await b.delete('k')
    expect(await read).toBe('before-delete') // asked before the delete
    expect(await b.getOrLoadResult('k', async () => 'after-delete')).toEqual({
      value: 'after-delete',
      outcome: 'loaded',
    })
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
  })

  it('a delete that lands during set() wins in L1 too, even without hearing its own broadcast', async () => {
    const redis = suite.server().client()
    const cache = createCache({ redis, ttl: '1m', namespace: 'setdel' })
    ;(cacheParts(cache).core.notifier as unknown as { listeners: Map<string, unknown> }).listeners.clear()
    let stale = 0
    for (let i = 0; i < 20; i++) {
      await Promise.all([cache.set(`k${i}`, 'old'), cache.delete(`k${i}`)])
      if ((await cache.getOrLoad(`k${i}`, async () => 'reloaded')) === 'old') stale++
    }
    expect(stale).toBe(0)
    await cache.close()
    redis.disconnect()
  })

  it('a value just set is served from L1 (the own broadcast does not drop it)', async () => {
    const redis = suite.server().client()
    const cache = createCache({ redis, ttl: '1m', namespace: 'setl1' })
    const subscribed = async () =>
      ((await redis.pubsub('NUMSUB', 'setl1:__invalidations')) as [string, number])[1] === 1
    for (const deadline = Date.now() + 5_000; !(await subscribed()) && Date.now() < deadline;) await sleep(10)
    await cache.set('k', 'v')
    await sleep(50) // let our own broadcast come back
    const hits: string[] = []
    cache.on('hit', ({ tier }) => hits.push(tier))
    expect(await cache.getOrLoad('k', async () => 'unused')).toBe('v')
    expect(hits).toEqual(['l1'])
    await cache.close()
    redis.disconnect()
  })

  it('a hit-for-miss loader that never settles is bounded by lock.maxHold, so close() returns', async () => {
    const redis = suite.server().client()
    const cache = createCache({ redis, ttl: '1m', namespace: 'pass', lock: { lease: 100, maxHold: 300 } })
    await cache.getOrLoad('k', (ctx) => (ctx.doNotCache({ passFor: '10s' }), 'private'))
    const error = await cache.getOrLoad('k', () => new Promise<string>(() => {})).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LoaderTimeoutError)
    expect((error as LoaderTimeoutError).option).toBe('lock.maxHold')
    await cache.close()
    redis.disconnect()
  })

  it('a lost connection fails fast instead of waiting out redisTimeout', async () => {
    const doomed = await startRedis()
    const redis = doomed.client({ maxRetriesPerRequest: null, retryStrategy: () => 100 })
    redis.on('error', () => {})
    const cache = createCache({ redis, ttl: '1m', redisTimeout: 5_000 })
    await cache.getOrLoad('warm', async () => 'cached')
    await doomed.kill()
    for (const deadline = Date.now() + 5_000; redis.status === 'ready' && Date.now() < deadline;) await sleep(5)
    const started = performance.now()
    expect(await cache.getOrLoad('cold', async () => 'from-loader')).toBe('from-loader')
    expect(performance.now() - started).toBeLessThan(2_500) // not the 5 s timeout a queued command would cost
    await cache.close()
    redis.disconnect()
  })

  it('a command in flight when the connection drops fails at once instead of waiting out redisTimeout', async () => {
    const doomed = await startRedis()
    const redis = doomed.client({ maxRetriesPerRequest: null, retryStrategy: () => 100 })
    redis.on('error', () => {})
    const cache = createCache({ redis, ttl: '1m', redisTimeout: 5_000, l1: false })
    await cache.getOrLoad('warm', async () => 'cached')
    doomed.pause() // the next lookup is sent and gets no answer
    const started = performance.now()
    const answer = cache.getOrLoad('warm', async () => 'from-loader')
    await sleep(100)
    await doomed.kill() // the socket closes under the pending command
    expect(await answer).toBe('from-loader')
    expect(performance.now() - started).toBeLessThan(2_500) // not the 5 s timeout
    await cache.close()
    redis.disconnect()
  })

  it('while Redis is unreachable, a copy still in grace is served without a per-process reload', async () => {
    const doomed = await startRedis()
    const redis = doomed.client({ maxRetriesPerRequest: null, retryStrategy: () => 100 })
    redis.on('error', () => {})
    const cache = createCache({ redis, ttl: 100, staleTtl: '1m' })
    let loads = 0
    const loader = async () => ++loads
    await cache.getOrLoad('k', loader)
    await doomed.kill()
    for (const deadline = Date.now() + 5_000; redis.status === 'ready' && Date.now() < deadline;) await sleep(5)
    await sleep(150) // past ttl, inside staleTtl
    expect(await cache.getOrLoadResult('k', loader)).toEqual({ value: 1, outcome: 'stale' })
    for (const deadline = Date.now() + 5_000; cache.stats()['redis-error'] === 0 && Date.now() < deadline;)
      await sleep(5)
    await cache.close() // waits for the background refresh attempt to settle
    expect(cache.stats()['redis-error']).toBeGreaterThan(0)
    expect(loads).toBe(1)
    redis.disconnect()
  })
})
