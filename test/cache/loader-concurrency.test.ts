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
import { Redis } from 'ioredis'
import { NEVER_ABORTED } from '../../src/cache/call.js'
import { LoaderPermits } from '../../src/cache/loader-permits.js'
import { CacheEmitter } from '../../src/events.js'
import { startBlackholeProxy } from '../support/blackhole-proxy.js'
import { createPostgresDatabase, postgresAvailable } from '../support/databases.js'
import { redisAvailable, startRedis } from '../support/redis.js'
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

  it.skipIf(!postgresAvailable)(
    '4 processes × 1,000 cold keys, each load a PostgreSQL query: the database counts at most `limit` at once',
    async () => {
      const limit = 3
      const db = await createPostgresDatabase('loader_cap')
      try {
        const admin = await db.pool({ max: 1 })
        await admin.query('CREATE TABLE cap (inside integer NOT NULL, peak integer NOT NULL)')
        await admin.query('INSERT INTO cap VALUES (0, 0)')
        await admin.query('CREATE TABLE loads (key text NOT NULL)')
        const workers = await suite.spawn(4, {
          CACHE_OPTIONS: JSON.stringify({ loaderConcurrency: { limit } }),
          PG_DATABASE: db.name,
        })
        const keys = Array.from({ length: 1_000 }, (_, i) => `pg-cold-${i}`)
        const reports = await Promise.all(
          workers.map((worker, w) =>
            worker.request<ColdKeysReport>(
              {
                keys: keys.map((_, i) => keys[(i * 7 + w * 101) % keys.length]!),
                loaderMs: 10,
                waitTimeout: 120_000,
              } satisfies ColdKeysRequest,
              150_000,
            ),
          ),
        )
        expect(reports.map((r) => r.errors)).toEqual([{}, {}, {}, {}])
        expect(reports.reduce((sum, r) => sum + r.values, 0)).toBe(4 * keys.length)
        const { rows: loads } = await admin.query<{ loads: string; keys: string }>(
          'SELECT count(*) AS loads, count(DISTINCT key) AS keys FROM loads',
        )
        expect(loads[0]).toEqual({ loads: '1000', keys: '1000' }) // each cold key queried once
        const { rows } = await admin.query<{ inside: number; peak: number }>('SELECT inside, peak FROM cap')
        expect(rows[0]!.inside).toBe(0)
        expect(rows[0]!.peak).toBeLessThanOrEqual(limit)
        expect(rows[0]!.peak).toBeGreaterThanOrEqual(2) // a cap, not a mutex
        console.log(
          `[loaderConcurrency] PostgreSQL: 1,000 keys × 4 processes: 1,000 queries, at most ${rows[0]!.peak} at once (limit ${limit})`,
        )
        await Promise.all(workers.map((worker) => worker.stop()))
      } finally {
        await db.drop()
      }
    },
    180_000,
  )

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

  it('a leader whose lease runs out while it waits in line for a permit shares no failure and fails none of its callers: its loader never ran, both re-check and one loads', async () => {
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
    finish()
    expect(await holding).toBe('slow')
    // Before: b got RemoteLoaderError, a's lost lease shared as if a's loader had failed; then
    // a's own caller got LockLostError. Now both re-check: one of them leads, the other gets its value.
    const [fromLeader, fromWaiter] = await Promise.all([leaderOutcome, waiterOutcome])
    expect(fromLeader).toBe(fromWaiter)
    expect(['from a', 'from b']).toContain(fromLeader)
    expect(loads.a + loads.b).toBe(1)
    await Promise.all([a.close(), b.close()])
    clientA.disconnect()
    clientB.disconnect()
  }, 30_000)

  it('Redis down: loads fall back to a cap of `limit` per process (never uncapped), and every call is answered', async () => {
    const server = await startRedis()
    const redis = server.client({ maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    const cache = createCache({ redis, ttl: '1m', redisTimeout: 200, loaderConcurrency: { limit: 2 } })
    const fallbacks: unknown[] = []
    cache.on('redis-error', ({ operation }) => operation === 'loaderConcurrency' && fallbacks.push(operation))
    await cache.ready()
    await server.kill() // the connection drops: no permit can be asked for
    await expect.poll(() => redis.status, { timeout: 10_000 }).not.toBe('ready')
    let inside = 0
    let peak = 0
    let loads = 0
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const load = (key: string) => async () => {
      loads++
      peak = Math.max(peak, ++inside)
      await gate
      inside--
      return `value-of-${key}`
    }
    const keys = Array.from({ length: 20 }, (_, i) => `down-${i}`)
    const calls = keys.map((key) => cache.getOrLoad(key, load(key), { waitTimeout: 30_000 }))
    await expect.poll(() => inside, { timeout: 10_000 }).toBe(2) // two loads run, the others wait for them
    open()
    expect(await Promise.all(calls)).toEqual(keys.map((key) => `value-of-${key}`))
    // Before: each load whose permit could not be asked for ran without one: 20 at once.
    expect(peak).toBe(2)
    expect(loads).toBe(keys.length)
    await cache.close()
    redis.disconnect()
    await server.stop()
  }, 60_000)

  it('a slow Redis (permit commands time out, the connection up) does not lift the cap: the permit is asked for again', async () => {
    const server = suite.server()
    const proxy = await startBlackholeProxy(server.port)
    const [direct, slow] = [server.client(), new Redis(proxy.port, '127.0.0.1', { maxRetriesPerRequest: 1 })]
    slow.on('error', () => {})
    const timing = { leaseMs: 5_000, commandTimeoutMs: 200 }
    const holder = new LoaderPermits(direct, 'slow-redis', 1, 100, timing, () => false, new CacheEmitter())
    const slowEvents = new CacheEmitter()
    const slowPermits = new LoaderPermits(slow, 'slow-redis', 1, 100, timing, () => false, slowEvents)
    let timeouts = 0
    slowEvents.on('redis-error', ({ error }) => void (/timed out/.test((error as Error).message) && timeouts++))
    let inside = 0
    let peak = 0
    const counted = async <T>(work: () => Promise<T>): Promise<T> => {
      peak = Math.max(peak, ++inside)
      try {
        return await work()
      } finally {
        inside--
      }
    }
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const holding = holder.run('a', 5_000, NEVER_ABORTED, () => counted(() => gate.then(() => 'a')))
    await expect.poll(() => inside, { timeout: 10_000 }).toBe(1) // the one permit is held
    await slow.ping()
    proxy.stall('replies') // commands still reach Redis and run; their answers come late
    const queued = slowPermits.run('b', 30_000, NEVER_ABORTED, () => counted(async () => 'b'))
    await expect.poll(() => timeouts >= 3 || peak > 1, { timeout: 10_000 }).toBe(true)
    // Before: the first timeout ran the load without a permit, beside the holder's.
    expect(peak).toBe(1)
    proxy.resume()
    open()
    expect(await holding).toBe('a')
    expect(await queued).toBe('b')
    expect(peak).toBe(1)
    await Promise.all([holder.close(), slowPermits.close()])
    slow.disconnect()
    await proxy.close()
  }, 60_000)

  it('bad options are refused before anything is sent', () => {
    const redis = suite.server().client()
    expect(() => createCache({ loaderConcurrency: { limit: 2 } })).toThrow(InvalidArgumentError)
    for (const bad of [{ limit: 0 }, { limit: 1.5 }, { limit: 10_001 }, {}, { limit: 2, max: 1 }, 'x'])
      expect(() => createCache({ redis, loaderConcurrency: bad as never })).toThrow(InvalidArgumentError)
    redis.disconnect()
  })
})
