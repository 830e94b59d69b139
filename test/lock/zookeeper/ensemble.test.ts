/**
 * The ZooKeeper backend on a real 3-node ensemble: losing the leader mid-contention keeps
 * the lock working, never with two holders (sessions move to the surviving servers);
 * losing the quorum makes `acquire` fail with a typed error within its wait. The tests
 * run in order on one ensemble.
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockBackendError } from '../../../src/errors.js'
import { createLocks } from '../../../src/lock/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { forkWorker, type Worker } from '../../support/workers.js'
import { startZooKeeperEnsemble, zookeeperAvailable, type ZooKeeperEnsemble } from '../../support/zookeeper.js'
import { contendThroughLeaderLoss } from '../../support/etcd-zookeeper-scenarios.js'

const WORKER = new URL('../../support/etcd-zookeeper-worker.ts', import.meta.url)

describe.skipIf(!zookeeperAvailable || !redisAvailable)('ZooKeeper lock backend (3-node ensemble)', () => {
  let ensemble: ZooKeeperEnsemble
  let redisServer: RedisServer
  let redis: Redis
  let workers: Worker[] = []

  beforeAll(async () => {
    ;[ensemble, redisServer] = await Promise.all([startZooKeeperEnsemble(3), startRedis()])
    redis = redisServer.client()
  })
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()))
    await ensemble?.stop()
    await redisServer?.stop()
  })

  it('the leader is killed mid-contention: the lock keeps working on the other two, never with two holders', async () => {
    const env = {
      LOCK_BACKEND: 'zookeeper',
      ZK_CONNECT: ensemble.connectionString,
      ZK_SESSION_MS: '2000',
      REDIS_URL: redisServer.url,
    }
    workers = await Promise.all(Array.from({ length: 3 }, () => forkWorker(WORKER, { env })))
    await contendThroughLeaderLoss('zookeeper ensemble', workers, redis, async () => {
      for (const server of ensemble.servers) {
        if ((await server.mode()) === 'leader') {
          await server.kill()
          return `server ${server.id}`
        }
      }
      throw new Error('no ZooKeeper server reports itself leader')
    })
  })

  it('without a quorum (two servers down), acquire fails with LockBackendError within its wait', async () => {
    const client = await ensemble.client({ sessionTimeout: 2_000 })
    const locks = createLocks({ zookeeper: client, commandTimeout: '1s' })
    const alive = ensemble.servers.filter((s) => s.running)
    for (const server of alive.slice(1)) await server.kill()
    const startedAt = performance.now()
    const error = await locks.acquire('quorum-key', { wait: '3s' }).catch((err: unknown) => err)
    const elapsed = performance.now() - startedAt
    console.log(
      `[zookeeper ensemble] acquire without a quorum failed after ${elapsed.toFixed(0)} ms: ${(error as Error).message}`,
    )
    expect(error).toBeInstanceOf(LockBackendError)
    expect(elapsed).toBeLessThan(3_000)
    await locks.close()
  })
})
