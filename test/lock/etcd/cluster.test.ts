/**
 * The etcd backend on a real 3-member cluster: losing the leader mid-contention keeps
 * the lock working with never two holders; losing the quorum makes `acquire` fail with a
 * typed error within its wait. One cluster for the file; the tests run in order (the
 * second one leaves the cluster without a quorum).
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockBackendError } from '../../../src/errors.js'
import { createLocks } from '../../../src/lock/index.js'
import { etcdAvailable, startEtcdCluster, type EtcdCluster } from '../../support/etcd.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { forkWorker, type Worker } from '../../support/workers.js'
import { contendThroughLeaderLoss } from '../../support/etcd-zookeeper-scenarios.js'

const WORKER = new URL('../../support/etcd-zookeeper-worker.ts', import.meta.url)

describe.skipIf(!etcdAvailable || !redisAvailable)('etcd lock backend (3-member cluster)', () => {
  let cluster: EtcdCluster
  let redisServer: RedisServer
  let redis: Redis
  let workers: Worker[] = []

  beforeAll(async () => {
    ;[cluster, redisServer] = await Promise.all([startEtcdCluster(3), startRedis()])
    redis = redisServer.client()
  })
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()))
    await cluster?.stop()
    await redisServer?.stop()
  })

  it('the leader is killed mid-contention: the lock keeps working on the other two, never with two holders', async () => {
    const env = { LOCK_BACKEND: 'etcd', ETCD_HOSTS: cluster.hosts.join(','), REDIS_URL: redisServer.url }
    workers = await Promise.all(Array.from({ length: 3 }, () => forkWorker(WORKER, { env })))
    await contendThroughLeaderLoss('etcd cluster', workers, redis, async () => {
      const leader = await cluster.leader()
      await leader.kill()
      return leader.name
    })
  })

  it('without a quorum (two members down), acquire fails with LockBackendError within its wait', async () => {
    const alive = cluster.members.filter((m) => m.running)
    await alive[0]!.kill()
    const client = cluster.client()
    const locks = createLocks({ etcd: client, commandTimeout: '1s' })
    const startedAt = performance.now()
    const error = await locks.acquire('quorum-key', { wait: '3s', lease: '1s' }).catch((err: unknown) => err)
    const elapsed = performance.now() - startedAt
    console.log(
      `[etcd cluster] acquire without a quorum failed after ${elapsed.toFixed(0)} ms: ${(error as Error).message}`,
    )
    expect(error).toBeInstanceOf(LockBackendError)
    expect(elapsed).toBeLessThan(3_000)
    await locks.close()
  })
})
