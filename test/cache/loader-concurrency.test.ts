/**
 * loaderConcurrency: a fleet-wide cap on loader runs. Across real processes, the loads are
 * counted where the database would see them (a Redis counter incremented by each loader
 * while it runs): never more than `limit` at once, and each cold key still loaded once. In
 * one process: a load that gets no permit in its callers' waitTimeout does not run
 * (LoaderConcurrencyError, whatever onWaitTimeout says), and bad options are refused.
 */
import { describe, expect, it } from 'vitest'
import { createCache, InvalidArgumentError, LoaderConcurrencyError } from '../../src/index.js'
import { entryKeys } from '../../src/cache/redis/keys.js'
import { redisAvailable } from '../support/redis.js'
import { sleep } from '../support/timing.js'
import { useWorkerSuite } from '../support/worker-suite.js'
import type { ColdKeysReport, ColdKeysRequest } from '../fixtures/loader-cap-worker.js'

describe.skipIf(!redisAvailable)('loaderConcurrency', () => {
  const suite = useWorkerSuite(new URL('../fixtures/loader-cap-worker.ts', import.meta.url))

  it('4 processes × 400 cold keys: at most `limit` loaders at once across them, counted at the "database", each key loaded once', async () => {
    const limit = 3
    const workers = await suite.spawn(4, { CACHE_OPTIONS: JSON.stringify({ loaderConcurrency: { limit } }) })
    const keys = Array.from({ length: 400 }, (_, i) => `cold-${i}`)
    // Every process asks for every key, each in its own order: a stampede per key, and 400 loads to cap.
    const reports = await Promise.all(
      workers.map((worker, w) => {
        const request: ColdKeysRequest = {
          keys: keys.map((_, i) => keys[(i * 7 + w * 101) % keys.length]!),
          loaderMs: 20,
          waitTimeout: 120_000,
        }
        return worker.request<ColdKeysReport>(request, 150_000)
      }),
    )
    const redis = suite.redis()
    expect(reports.map((r) => r.errors)).toEqual([{}, {}, {}, {}])
    expect(reports.reduce((sum, r) => sum + r.values, 0)).toBe(4 * keys.length)
    const loads = (await redis.mget(keys.map((key) => `loads:${key}`))).map(Number)
    expect(loads).toEqual(keys.map(() => 1))
    const peak = Number(await redis.get('peak'))
    expect(peak).toBeLessThanOrEqual(limit)
    expect(peak).toBeGreaterThanOrEqual(2) // loads did run side by side: a cap, not a mutex
    expect(Number(await redis.get('inside'))).toBe(0)
    console.log(`[loaderConcurrency] 400 keys × 4 processes: 400 loads, at most ${peak} at once (limit ${limit})`)
  }, 180_000)

  it('a load that gets no permit within waitTimeout does not run: LoaderConcurrencyError, never its own loader', async () => {
    const redis = suite.server().client()
    const cache = createCache({ redis, ttl: '1m', loaderConcurrency: { limit: 1 } })
    let ran = 0
    let finish!: () => void
    const holding = cache.getOrLoad('slow', () => new Promise<string>((resolve) => (finish = () => resolve('slow'))))
    await expect.poll(() => finish !== undefined, { timeout: 10_000 }).toBe(true) // the one permit is taken
    const load = async () => (ran++, 'queued')
    for (const onWaitTimeout of ['load', 'throw'] as const) {
      const denied = cache.getOrLoad(`queued-${onWaitTimeout}`, load, { waitTimeout: 200, onWaitTimeout })
      await expect(denied).rejects.toBeInstanceOf(LoaderConcurrencyError)
    }
    expect(ran).toBe(0)
    finish()
    expect(await holding).toBe('slow')
    expect(await cache.getOrLoad('queued-load', load, { waitTimeout: 10_000 })).toBe('queued')
    expect(ran).toBe(1)
    await cache.close()
    redis.disconnect()
  }, 30_000)

  it('a leader whose lease runs out while it waits in line for a permit shares no failure: its loader never ran, a waiter elsewhere leads', async () => {
    const options = {
      ttl: '1m',
      namespace: 'lost-in-line',
      loaderConcurrency: { limit: 1 },
      lock: { lease: 300 },
    } as const
    const [clientA, clientB] = [suite.server().client(), suite.server().client()]
    const a = createCache({ redis: clientA, ...options })
    const b = createCache({ redis: clientB, ...options })
    let finish!: () => void
    const holding = b.getOrLoad('slow', () => new Promise<string>((resolve) => (finish = () => resolve('slow'))))
    await expect.poll(() => finish !== undefined, { timeout: 10_000 }).toBe(true) // b holds the one permit
    const loads = { a: 0, b: 0 }
    const leader = a.getOrLoad('k', async () => (loads.a++, 'from a'), { waitTimeout: 10_000 })
    const leaderOutcome = leader.then(
      (value) => value,
      (error: Error) => error.name,
    )
    const lockKey = entryKeys('lost-in-line', 'k').lock
    await expect.poll(() => clientB.exists(lockKey), { timeout: 10_000 }).toBe(1) // a leads k, in line for the permit
    const waiter = b.getOrLoad('k', async () => (loads.b++, 'from b'), { waitTimeout: 10_000 })
    const waiterOutcome = waiter.then(
      (value) => value,
      (error: Error) => `${error.name}: ${error.message}`,
    )
    await sleep(50) // b waits on a's lock
    // a's renewals reached Redis (the lock stays a's there) but a pauses past its lease (GC,
    // SIGSTOP): by its own clock the lease ran out, so it gives up its place in line.
    await suite.redis().pexpire(lockKey, 5_000)
    const until = performance.now() + 500
    while (performance.now() < until) {
      // blocked: no timer runs
    }
    expect(await leaderOutcome).toBe('LockLostError') // a's own caller: its lease is gone, nothing loaded
    finish()
    expect(await holding).toBe('slow')
    // Before: b got RemoteLoaderError, a's lost lease shared as if a's loader had failed.
    expect(await waiterOutcome).toBe('from b')
    expect(loads).toEqual({ a: 0, b: 1 })
    await Promise.all([a.close(), b.close()])
    clientA.disconnect()
    clientB.disconnect()
  }, 30_000)

  it('bad options are refused before anything is sent', () => {
    const redis = suite.server().client()
    expect(() => createCache({ loaderConcurrency: { limit: 2 } })).toThrow(InvalidArgumentError)
    for (const bad of [{ limit: 0 }, { limit: 1.5 }, { limit: 10_001 }, {}, { limit: 2, max: 1 }, 'x'])
      expect(() => createCache({ redis, loaderConcurrency: bad as never })).toThrow(InvalidArgumentError)
    redis.disconnect()
  })
})
