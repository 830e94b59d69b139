import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  describeRun,
  expectFailoverGoals,
  FAILOVER_HOT_KEY,
  FAILOVER_KEYS,
  runFailoverUnderLoad,
  type FailoverRun,
} from '../support/failover-load.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { redisCliBinary, startCluster, type RedisClusterHandle } from '../support/redis-cluster.js'

const ci = process.env.CI === 'true'
const KEYS = FAILOVER_KEYS
const HOT = FAILOVER_HOT_KEY

describe.skipIf(!redisAvailable || (!redisCliBinary && !ci))(
  'Redis Cluster failover under load (3 masters + 3 replicas, 4 processes)',
  () => {
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

    /**
     * Errors the nodes answered since the run began (INFO errorstats), summed by prefix: MOVED,
     * NOSCRIPT, CLUSTERDOWN, TRYAGAIN… (ERR counts ioredis' CLIENT SETINFO, unknown to Redis 7.0.)
     */
    async function errorsOnNodes(): Promise<Record<string, number>> {
      const totals: Record<string, number> = {}
      for (const node of cluster.nodes.filter((n) => n.running)) {
        for (const [, name, count] of (await cluster.admin(node).info('errorstats')).matchAll(
          /^errorstat_(\w+):count=(\d+)/gm,
        )) {
          totals[name!] = (totals[name!] ?? 0) + Number(count)
        }
      }
      return totals
    }

    /** As a promoted node that never ran our scripts (a replica's script cache is its own): every master forgets them. */
    async function forgetScripts(): Promise<void> {
      await Promise.all((await cluster.masters()).map((master) => cluster.admin(master).script('FLUSH')))
    }

    async function run(
      namespace: string,
      failover: () => Promise<void>,
    ): Promise<FailoverRun & { nodeErrors: Record<string, number> }> {
      await Promise.all(cluster.nodes.filter((n) => n.running).map((n) => cluster.admin(n).config('RESETSTAT')))
      // The 30 keys really are spread over every master.
      const owners = new Set(
        await Promise.all(KEYS.map(async (key) => (await cluster.ownerOf(`${namespace}:{k:${key}}`)).master)),
      )
      expect(owners.size).toBe(3)
      const result = await runFailoverUnderLoad({
        env: { CLUSTER_NODES: JSON.stringify(cluster.startupNodes) },
        db,
        dbUrl: database.url,
        namespace,
        failover,
      })
      const nodeErrors = await errorsOnNodes()
      console.log(describeRun(namespace, result), 'node errors:', JSON.stringify(nodeErrors))
      return { ...result, nodeErrors }
    }

    it("graceful CLUSTER FAILOVER of the hot key's master", async () => {
      const result = await run('graceful', async () => {
        const { replicas } = await cluster.ownerOf(`graceful:{k:${HOT}}`)
        await cluster.failover(replicas[0]!)
        await forgetScripts()
      })
      expectFailoverGoals(result)
      expect(result.nodeErrors.MOVED).toBeGreaterThan(0) // the demoted master redirected clients, and they followed
      expect(result.nodeErrors.NOSCRIPT).toBeGreaterThan(0) // and EVALSHA of a forgotten script fell back to EVAL
    })

    it("SIGKILL of the hot key's master (its replica takes over after cluster-node-timeout)", async () => {
      let killed: RedisServer | undefined
      const result = await run('sigkill', async () => {
        const { master, replicas } = await cluster.ownerOf(`sigkill:{k:${HOT}}`)
        killed = master
        await master.kill()
        await cluster.waitForMaster(replicas[0]!)
        await forgetScripts()
      })
      await killed!.restart()
      await cluster.waitHealthy()
      expectFailoverGoals(result)
      expect(result.nodeErrors.CLUSTERDOWN).toBeGreaterThan(0) // until the replica was elected, and ioredis retried
      expect(result.nodeErrors.NOSCRIPT).toBeGreaterThan(0)
    })
  },
)
