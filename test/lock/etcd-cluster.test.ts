/**
 * The etcd backend on a real 3-member cluster: losing the leader mid-contention keeps
 * the lock working with never two holders; losing the quorum makes `acquire` fail with a
 * typed error within its wait. One cluster for the file; the tests run in order (the
 * second one leaves the cluster without a quorum).
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockBackendError } from '../../src/errors.js'
import { createLocks } from '../../src/lock/index.js'
import { etcdAvailable, startEtcdCluster, type EtcdCluster } from '../support/etcd.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { until } from '../support/timing.js'
import { forkWorker, type Worker } from '../support/workers.js'

const WORKER = new URL('./etcd-zookeeper-worker.ts', import.meta.url)

type Contention = { tokens: string[]; errors: Record<string, number>; overlaps: number }

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
    await redis.set('rounds', 0)
    const runs = workers.map((w) => w.request<Contention>({ op: 'contend', key: 'cluster-key', rounds: 40, lease: 1_000, wait: 10_000 }, 120_000))
    // The critical sections count their rounds in Redis (see the worker's contend()).
    await until(async () => Number(await redis.get('rounds')) >= 15, 'contention to be under way', 30_000)
    const leader = await cluster.leader()
    await leader.kill()
    const roundsAtKill = Number(await redis.get('rounds'))
    const results = await Promise.all(runs)
    const tokens = results.flatMap((r) => r.tokens.map(BigInt))
    const errors = results.map((r) => r.errors)
    console.log(`[etcd cluster] killed leader ${leader.name} after ${roundsAtKill} rounds; ${tokens.length} sections held; failed attempts: ${JSON.stringify(errors)}`)
    expect(results.reduce((sum, r) => sum + r.overlaps, 0)).toBe(0)
    expect(new Set(tokens).size).toBe(tokens.length)
    // It kept working after the kill: more sections than before it.
    expect(Number(await redis.get('rounds'))).toBeGreaterThan(roundsAtKill + 20)
    // Whatever failed, failed typed (busy during the election, or the backend's own error).
    for (const byCode of errors) for (const code of Object.keys(byCode)) expect(['ERR_SG_LOCK_BUSY', 'ERR_SG_LOCK_BACKEND']).toContain(code)
  })

  it('without a quorum (two members down), acquire fails with LockBackendError within its wait', async () => {
    const alive = cluster.members.filter((m) => m.running)
    await alive[0]!.kill()
    const client = cluster.client()
    const locks = createLocks({ etcd: client, commandTimeout: '1s' })
    const startedAt = performance.now()
    const error = await locks.acquire('quorum-key', { wait: '3s', lease: '1s' }).catch((err: unknown) => err)
    const elapsed = performance.now() - startedAt
    console.log(`[etcd cluster] acquire without a quorum failed after ${elapsed.toFixed(0)} ms: ${(error as Error).message}`)
    expect(error).toBeInstanceOf(LockBackendError)
    expect(elapsed).toBeLessThan(3_000)
    await locks.close()
  })
})
