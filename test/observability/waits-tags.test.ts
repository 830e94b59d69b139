/**
 * The counters of two budget and invalidation events, on real redis-servers and a real
 * MeterProvider: `wait-capped` (a call past `maxPendingWaits` that did not wait for a lock held
 * by another process, a child process here) and `tag-invalidated` (a deleteByTag, counted
 * by the cache that ran it as `process` and by the one that heard it as `remote`).
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createCache, LockWaitTimeoutError, type Cache, type CacheOptions } from '../../src/index.js'
import { instrument, type Instrumentation } from '../../src/observability/index.js'
import { attributesOf, metricsHarness, valueOf, type MetricsHarness } from '../support/otel.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'
import { until } from '../support/timing.js'
import { forkWorker, type Worker } from '../support/workers.js'

const HOLDER = new URL('../fixtures/lock-holder.ts', import.meta.url)

describe.skipIf(!redisAvailable)('wait-capped and tag-invalidated as metrics', () => {
  let holder: Worker | undefined
  let metrics: MetricsHarness | undefined
  const caches: Cache[] = []
  const instrumentations: Instrumentation[] = []
  const suite = useRedisServer({
    flush: true,
    cleanup: async () => {
      await holder?.stop()
      holder = undefined
      for (const instrumentation of instrumentations.splice(0)) instrumentation.stop()
      await Promise.all(caches.splice(0).map((cache) => cache.close()))
    },
  })
  afterEach(async () => {
    await metrics?.shutdown()
    metrics = undefined
  })

  async function instrumented(
    options: Partial<CacheOptions>,
    extra: Parameters<typeof instrument>[1] = {},
  ): Promise<Cache> {
    const cache = createCache({ redis: suite.client(), ttl: '1m', ...options })
    caches.push(cache)
    instrumentations.push(instrument(cache, { meter: metrics!.provider.getMeter('test'), tracer: false, ...extra }))
    await cache.ready() // subscribed: invalidations and commit messages reach it from here on
    return cache
  }

  it('counts a call past maxPendingWaits once, under its key label, and not as a wait or a timeout', async () => {
    metrics = metricsHarness()
    holder = await forkWorker(HOLDER, {
      env: { REDIS_URL: suite.server().url, CACHE_OPTIONS: JSON.stringify({ lock: { lease: 10_000 } }) },
    })
    expect(await holder.request<number>({ op: 'hold', keys: ['cold:a', 'cold:b'] }, 30_000)).toBe(2)
    const cache = await instrumented(
      { maxPendingWaits: 1, waitTimeout: '30s' },
      { keyLabel: (key) => key.split(':')[0] },
    )

    const waiting = cache.getOrLoad('cold:a', async () => 'not me')
    await until(() => cache.stats().wait === 1, 'the first call to wait for the holder')
    // The one wait maxPendingWaits allows is running: the second key's call is refused at once (never loaded).
    await expect(cache.getOrLoad('cold:b', async () => 'not me either')).rejects.toThrow(LockWaitTimeoutError)

    const m = await metrics.collect()
    expect(valueOf(m, 'stampede_guard.cache.waits_capped', { 'stampede_guard.key.label': 'cold' })).toBe(1)
    expect(attributesOf(m, 'stampede_guard.cache.waits_capped')).toEqual([{ 'stampede_guard.key.label': 'cold' }]) // the key is not an attribute
    expect(m.get('stampede_guard.cache.waits_capped')?.descriptor.unit).toBe('{call}')
    expect(valueOf(m, 'stampede_guard.cache.waits', { 'stampede_guard.key.label': 'cold' })).toBe(1)
    expect(valueOf(m, 'stampede_guard.cache.timeouts', { 'stampede_guard.timeout.kind': 'wait' })).toBe(0) // the cap is not a waitTimeout
    expect(cache.stats()['wait-capped']).toBe(1)

    await holder.request({ op: 'release' }, 30_000)
    expect(await waiting).toBe('held-cold:a') // the waiter got the holder's value
    expect(
      valueOf(await metrics.collect(), 'stampede_guard.cache.waits_capped', { 'stampede_guard.key.label': 'cold' }),
    ).toBe(1)
  }, 60_000)

  it('counts a deleteByTag as process in the cache that ran it and as remote in the one that heard it', async () => {
    metrics = metricsHarness()
    const a = await instrumented({}, { name: 'a' })
    const b = await instrumented({}, { name: 'b' })
    await a.getOrLoad('p1', async () => 'v1', { tags: ['product:1'] })
    expect(await b.getOrLoad('p1', async () => 'unused')).toBe('v1')

    await a.deleteByTag('product:1')
    await until(() => b.stats()['tag-invalidated'] === 1, "a's broadcast to reach b")
    await b.deleteByTags(['product:2', 'category:7'])
    await until(() => a.stats()['tag-invalidated'] === 3, "b's two broadcasts to reach a")

    const m = await metrics.collect()
    const count = (name: string, from: string) =>
      valueOf(m, 'stampede_guard.cache.tag_invalidations', {
        'stampede_guard.cache.name': name,
        'stampede_guard.tag_invalidation.from': from,
      })
    expect([count('a', 'process'), count('a', 'remote')]).toEqual([1, 2])
    expect([count('b', 'process'), count('b', 'remote')]).toEqual([2, 1])
    expect(b.stats()['tag-invalidated']).toBe(3) // the counters agree with stats()
    for (const attributes of attributesOf(m, 'stampede_guard.cache.tag_invalidations')) {
      expect(Object.keys(attributes).sort()).toEqual([
        'stampede_guard.cache.name',
        'stampede_guard.tag_invalidation.from',
      ]) // no tag attribute
    }
    expect(await b.getOrLoad('p1', async () => 'v2')).toBe('v2') // b's L1 copy went with the tag
  })
})
