/**
 * Leader election on a 3-server ZooKeeper ensemble across processes: the server the leader
 * is connected to is killed. Each candidate talks to one server only, so the leader cannot
 * fail over to another: it must step down by its own clock, its session expires on the
 * ensemble (deleting its node), and a candidate on another server leads with a higher
 * term. After the server comes back, exactly one candidate leads. Every leader writes its
 * term to a fenced resource in Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, type Leader } from '../../../src/lock/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { until } from '../../support/timing.js'
import { startZooKeeperEnsemble, zookeeperAvailable, type ZooKeeperEnsemble } from '../../support/zookeeper.js'
import { exactlyOneLeader, expectNoOverlap, nextLeader, startCandidate, type Candidate } from './candidates.js'
import { readFence } from './fenced-resource.js'

const SESSION_MS = 2_000

describe.skipIf(!zookeeperAvailable || !redisAvailable)('leader election across processes (3-server ZooKeeper)', () => {
  let ensemble: ZooKeeperEnsemble
  let checkServer: RedisServer
  let candidates: Candidate[] = []

  beforeAll(async () => {
    ;[ensemble, checkServer] = await Promise.all([startZooKeeperEnsemble(3), startRedis()])
  }, 90_000)
  afterAll(async () => {
    await Promise.all(candidates.map((c) => c.worker.stop()))
    await Promise.all([ensemble?.stop(), checkServer?.stop()])
  })

  it('the server the leader is connected to is killed: it steps down, a candidate on another server leads with a higher term, never two at once', async () => {
    const name = 'server-killed'
    const check = checkServer.client()
    candidates = await Promise.all(
      ensemble.servers.map((server) =>
        startCandidate(
          `on-zk${server.id}`,
          {
            LOCK_BACKEND: 'zookeeper',
            ZK_CONNECT: `127.0.0.1:${server.clientPort}`,
            ZK_SESSION_MS: String(SESSION_MS),
            CHECK_URL: checkServer.url,
          },
          name,
          SESSION_MS,
        ),
      ),
    )
    const client = await ensemble.client({ sessionTimeout: SESSION_MS })
    const locks = createLocks<unknown>({ zookeeper: client })
    const observer = locks.observe(name)
    try {
      const first = await nextLeader(observer, undefined, 30_000)
      const leader = candidates.find((c) => c.id === first.id)!
      const server = ensemble.servers.find((s) => first.id === `on-zk${s.id}`)!
      await server.kill()
      await until(async () => !(await leader.status()).leading, 'the leader to step down by its clock', 20_000)
      const next: Leader = await nextLeader(observer, first, 60_000)
      expect(next.id).not.toBe(first.id)
      expect(next.term).toBeGreaterThan(first.term)
      await until(async () => (await readFence(check)).terms >= 2, 'the new term to write', 20_000)
      await server.restart()
      // The old leader's session expired on the ensemble: it campaigns again on a new client; one leads.
      await exactlyOneLeader(candidates, observer, 60_000)
      const fence = await readFence(check)
      expectNoOverlap(fence)
      expect(fence.fenced).toBe(0)
      const expired = (await leader.status()).sessionExpired
      console.log(
        `[election zookeeper server killed] zk${server.id} under term ${first.term} (${first.id}) → ${next.term} (${next.id}); the old leader's session expired: ${expired}; fence ${JSON.stringify({ ...fence, log: undefined })}`,
      )
    } finally {
      await observer.close()
      await locks.close()
      check.disconnect()
    }
  }, 240_000)
})
