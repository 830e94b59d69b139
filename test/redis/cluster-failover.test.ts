import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeRun, runFailoverUnderLoad, type FailoverRun } from '../support/failover-load.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { redisCliBinary, startCluster, type RedisClusterHandle } from '../support/redis-cluster.js'

const ci = process.env.CI === 'true'
const KEYS = Array.from({ length: 30 }, (_, i) => `item:${i}`)
const HOT = KEYS[0]!
const TTL_MS = 1_000

describe.skipIf(!redisAvailable || (!redisCliBinary && !ci))('Redis Cluster failover under load (3 masters + 3 replicas, 4 processes)', () => {
  let cluster: RedisClusterHandle
  let database: RedisServer
  let db: Redis

  beforeAll(async () => {
    ;[cluster, database] = await Promise.all([startCluster({ masters: 3, replicas: 1 }), startRedis()])
    db = database.client()
  })
  afterAll(async () => {
    await cluster?.stop()
    await database?.stop()
  })

  async function run(namespace: string, failover: () => Promise<void>): Promise<FailoverRun> {
    await db.flushall()
    // The 30 keys really are spread over every master.
    const owners = new Set(await Promise.all(KEYS.map(async (key) => (await cluster.ownerOf(`${namespace}:{k:${key}}`)).master)))
    expect(owners.size).toBe(3)
    const result = await runFailoverUnderLoad({
      env: { CLUSTER_NODES: JSON.stringify(cluster.startupNodes) },
      db,
      dbUrl: database.url,
      keys: KEYS,
      hotKey: HOT,
      ttlMs: TTL_MS,
      cacheOptions: { namespace },
      failover,
    })
    console.log(describeRun(namespace, result))
    return result
  }

  function expectGoals(result: FailoverRun): void {
    expect(result.reports.flatMap((r) => r.errors)).toEqual([])
    expect(result.reports.flatMap((r) => r.regressions)).toEqual([])
    expect(Object.entries(result.extraLoads).filter(([, extra]) => extra > 1)).toEqual([])
    // Waiters re-subscribed or polled: no call waited anywhere near waitTimeout (10 s).
    expect(Math.max(...result.reports.map((r) => r.slowestMs))).toBeLessThan(8_000)
  }

  it('graceful CLUSTER FAILOVER of the hot key\'s master', async () => {
    const result = await run('graceful', async () => {
      const { replicas } = await cluster.ownerOf(`graceful:{k:${HOT}}`)
      await cluster.failover(replicas[0]!)
    })
    expectGoals(result)
  })

  it('SIGKILL of the hot key\'s master (its replica takes over after cluster-node-timeout)', async () => {
    let killed: RedisServer | undefined
    const result = await run('sigkill', async () => {
      const { master, replicas } = await cluster.ownerOf(`sigkill:{k:${HOT}}`)
      killed = master
      await master.kill()
      await cluster.waitForMaster(replicas[0]!)
    })
    await killed!.restart()
    await cluster.waitHealthy()
    expectGoals(result)
  })
})
