/**
 * A reduced `cold` load scenario through the real harness (multi-process app, real Redis,
 * autocannon), asserting on COUNTS only: timings on a shared 2-core CI machine are noise,
 * but "how many times did the database get queried" is exact.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runLoad } from '../../load/stampede/harness.js'
import type { LoadResults, ModeResult } from '../../load/stampede/results.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'

describe.skipIf(!redisAvailable)('load: cold burst on one key (reduced)', () => {
  let redis: RedisServer
  let results: LoadResults

  beforeAll(async () => {
    redis = await startRedis()
    results = await runLoad({
      scenarios: ['cold'],
      modes: ['naive', 'lock'],
      workers: 2,
      // A slow first load keeps the miss window wide open even on a starved CI machine.
      dbLatencyMs: 200,
      timeScale: 0.5, // 1.5 s of traffic per mode
      connections: 100,
      redisUrl: redis.url,
      source: { kind: 'builtin' },
    })
  }, 60_000)

  afterAll(async () => {
    await redis?.stop()
  })

  const mode = (name: string): ModeResult => {
    const found = results.scenarios[0]!.modes.find((m) => m.mode === name)
    if (!found) throw new Error(`no result for mode ${name}`)
    return found
  }

  it('runs no warm-up unless asked: the cold burst must meet a cold app', () => {
    expect(results.settings.warmUp).toBeNull()
  })

  it('lock: exactly one database query for the whole burst, across all workers', () => {
    const lock = mode('lock')
    expect(lock.traffic.requests).toBeGreaterThan(100) // the burst really happened
    expect(lock.traffic.non2xx).toBe(0)
    expect(lock.dbQueries).toBe(1)
    expect(lock.cacheStats.load).toBe(1)
  })

  it('naive: the concurrent misses all go to the database (a stampede)', () => {
    const naive = mode('naive')
    expect(naive.traffic.non2xx).toBe(0)
    // 100 connections miss at once while the first load takes 200 ms: most of them load.
    expect(naive.dbQueries).toBeGreaterThanOrEqual(20)
    expect(naive.dbQueries).toBeGreaterThan(10 * mode('lock').dbQueries)
  })
})
