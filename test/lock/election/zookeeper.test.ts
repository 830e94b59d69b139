/**
 * Leader election on ZooKeeper across processes: the leader's session expires while it is
 * SIGSTOPped (two leaders after a session expiry or a reconnect: Curator 696, 620, 653,
 * 504), and a server restart. Every leader writes its term to a fenced resource in Redis.
 */
import type { Redis } from 'ioredis'
import type { Client } from 'node-zookeeper-client'
import { afterAll, afterEach, beforeAll, describe, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'
import {
  connectZooKeeper,
  startZooKeeper,
  zookeeperAvailable,
  type ZooKeeperEnsemble,
} from '../../support/zookeeper.js'
import {
  exactlyOneLeader,
  expectNoOverlap,
  nextLeader,
  pauseTheLeader,
  startCandidate,
  type Candidate,
} from './candidates.js'
import { readFence, resetFence } from './fenced-resource.js'

const SESSION_MS = 1_000

describe.skipIf(!zookeeperAvailable || !redisAvailable)('leader election across processes (ZooKeeper)', () => {
  let server: ZooKeeperEnsemble
  let checkServer: RedisServer
  let check: Redis
  let client: Client
  let locks: Locks<unknown>
  let candidates: Candidate[] = []
  let count = 0
  const env = () => ({
    LOCK_BACKEND: 'zookeeper',
    ZK_CONNECT: server.connectionString,
    ZK_SESSION_MS: String(SESSION_MS),
    CHECK_URL: checkServer.url,
  })

  beforeAll(async () => {
    ;[server, checkServer] = await Promise.all([startZooKeeper(), startRedis()])
    check = checkServer.client()
    client = await connectZooKeeper(server.connectionString, { sessionTimeout: 2_000 })
    locks = createLocks<unknown>({ zookeeper: client })
  })
  afterAll(async () => {
    await locks?.close()
    client?.close()
    await Promise.all([server?.stop(), checkServer?.stop()])
  })
  afterEach(async () => {
    await Promise.all(candidates.map((c) => c.worker.stop()))
    candidates = []
    await resetFence(check)
  })

  it("the leader's session expires while it is stopped: one new leader, a higher term, and the old one knows at once", async () => {
    const name = `expired-${++count}`
    const observer = locks.observe(name)
    try {
      candidates = await Promise.all(['a', 'b'].map((id) => startCandidate(id, env(), name, SESSION_MS)))
      const { first, second, status } = await pauseTheLeader(candidates, observer, check)
      await exactlyOneLeader(candidates, observer)
      const fence = await readFence(check)
      console.log(
        `[election zookeeper session expiry] term ${first.term} (${first.id}) → ${second.term} (${second.id}); old session expired: ${status.sessionExpired}; fence ${JSON.stringify({ ...fence, log: undefined })}`,
      )
    } finally {
      await observer.close()
    }
  }, 60_000)

  it('after a ZooKeeper restart exactly one leader', async () => {
    const name = `restart-${++count}`
    const observer = locks.observe(name)
    try {
      candidates = await Promise.all(['a', 'b', 'c'].map((id) => startCandidate(id, env(), name, SESSION_MS)))
      const first = await nextLeader(observer)
      const zk = server.servers[0]!
      await zk.kill()
      const leader = candidates.find((c) => c.id === first.id)!
      await until(async () => !(await leader.status()).leading, 'the leader to step down by its clock', 10_000)
      await sleep(SESSION_MS)
      await zk.restart()
      // This process's own client may have lost its session in the outage (a dead client): observe on a new one.
      const after = await connectZooKeeper(server.connectionString, { sessionTimeout: 2_000 })
      const afterLocks = createLocks<unknown>({ zookeeper: after })
      const fresh = afterLocks.observe(name)
      try {
        const survivor = await exactlyOneLeader(candidates, fresh, 40_000)
        const fence = await readFence(check)
        expectNoOverlap(fence)
        console.log(
          `[election zookeeper restart] term ${first.term} (${first.id}) → ${fresh.leader!.term} (${survivor.id}); candidates' sessions expired: ${JSON.stringify(await Promise.all(candidates.map(async (c) => (await c.status()).sessionExpired)))}; fence ${JSON.stringify({ ...fence, log: undefined })}`,
        )
      } finally {
        await fresh.close()
        await afterLocks.close()
        after.close()
      }
    } finally {
      await observer.close()
    }
  }, 90_000)
})
