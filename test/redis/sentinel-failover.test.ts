import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeRun, runFailoverUnderLoad, type FailoverRun } from '../support/failover-load.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { startSentinel, type SentinelHandle } from '../support/redis-sentinel.js'

const KEYS = Array.from({ length: 30 }, (_, i) => `item:${i}`)
const HOT = KEYS[0]!
const TTL_MS = 1_000

describe.skipIf(!redisAvailable)('Sentinel promotion under load (primary + replica + 3 sentinels, 4 processes)', () => {
  let sentinel: SentinelHandle
  let database: RedisServer
  let db: Redis

  beforeAll(async () => {
    ;[sentinel, database] = await Promise.all([startSentinel(), startRedis()])
    db = database.client()
  })
  afterAll(async () => {
    await sentinel?.stop()
    await database?.stop()
  })

  async function run(namespace: string, failover: () => Promise<void>): Promise<FailoverRun> {
    await db.flushall()
    const result = await runFailoverUnderLoad({
      env: { SENTINELS: JSON.stringify(sentinel.sentinelNodes), SENTINEL_NAME: sentinel.masterName },
      db,
      dbUrl: database.url,
      keys: KEYS,
      hotKey: HOT,
      ttlMs: TTL_MS,
      cacheOptions: { namespace },
      failover,
    })
    console.log(describeRun(namespace, result))
    if (process.env.DEBUG_FAILOVER) {
      console.log(JSON.stringify(result.loads[HOT]!.map((l) => ({ ...l, start: l.start - result.failedAt, end: l.end - result.failedAt }))))
      for (const r of result.reports) {
        const seen = new Map<string, number[]>()
        for (const e of r.redisErrors) seen.set(`${e.operation}: ${e.message}`, [...(seen.get(`${e.operation}: ${e.message}`) ?? []), e.at - result.failedAt])
        console.log([...seen].map(([m, at]) => `${m} x${at.length} [${at[0]}..${at.at(-1)}]`).join('\n'))
      }
    }
    return result
  }

  function expectGoals(result: FailoverRun): void {
    expect(result.reports.flatMap((r) => r.errors)).toEqual([])
    expect(result.reports.flatMap((r) => r.regressions)).toEqual([])
    expect(Object.entries(result.extraLoads).filter(([, extra]) => extra > 1)).toEqual([])
    expect(Math.max(...result.reports.map((r) => r.slowestMs))).toBeLessThan(8_000)
  }

  it('SENTINEL FAILOVER (the replica is promoted, the primary demoted)', async () => {
    const result = await run('sentinel-failover', async () => {
      await sentinel.failover()
    })
    expectGoals(result)
  })

  it('SIGKILL of the primary (the sentinels agree it is down and promote the replica)', async () => {
    let killed: RedisServer | undefined
    const result = await run('sentinel-sigkill', async () => {
      killed = await sentinel.primary()
      await killed.kill()
      await sentinel.waitHealthy({ not: killed })
    })
    await sentinel.rejoin(killed!)
    expectGoals(result)
  })
})
