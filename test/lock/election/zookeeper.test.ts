/**
 * Leader election on ZooKeeper across processes: the leader's session expires while it is
 * SIGSTOPped (two leaders after a session expiry or a reconnect: Curator 696, 620, 653,
 * 504), leaders SIGKILLed every 2 s, and a server restart. Every leader writes its term to
 * a fenced resource in Redis.
 */
import type { Redis } from 'ioredis'
import type { Client } from 'node-zookeeper-client'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
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
  runKillLoop,
  KILL_ROUNDS,
  nextLeader,
  pauseTheLeader,
  startCandidate,
  type Candidate,
} from './candidates.js'
import { readFence, resetFence } from './fenced-resource.js'

const SESSION_MS = 1_000
/** The restart test's sessions: the longest the test servers grant, so a loaded machine's pauses do not churn terms. */
const RESTART_SESSION_MS = 2_000
/** Leaders killed, one every 2 s (about 10 s of kills). */

describe.skipIf(!zookeeperAvailable || !redisAvailable)('leader election across processes (ZooKeeper)', () => {
  let server: ZooKeeperEnsemble
  let checkServer: RedisServer
  let check: Redis
  let client: Client
  let locks: Locks<unknown>
  let candidates: Candidate[] = []
  let count = 0
  const env = (sessionMs = SESSION_MS) => ({
    LOCK_BACKEND: 'zookeeper',
    ZK_CONNECT: server.connectionString,
    ZK_SESSION_MS: String(sessionMs),
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

  it(
    '5 candidates in 5 processes, the leader SIGKILLed every 2 s: never two leaders, terms only grow',
    () =>
      runKillLoop({
        label: 'election zookeeper kill loop',
        name: `killed-${++count}`,
        observe: (name) => locks.observe(name),
        spawn: (id, name) => startCandidate(id, env(), name, SESSION_MS),
        check,
        candidates,
      }),
    60_000 + 10_000 * KILL_ROUNDS,
  )

  /**
   * Every wait is bounded and sized for a loaded 2-core machine (a JVM restart alone can take
   * 20 s there), and the test's own limit covers their sum, so a failure is one of these waits
   * saying what it saw (how many candidates led, what the observer reported), never the
   * test's timeout. The sessions outlive the outage on the server (it restores them from its
   * data dir and they reconnect), so the old leader's node is removed by its own resignation.
   */
  it('after a ZooKeeper restart exactly one leader', async () => {
    const name = `restart-${++count}`
    const observer = locks.observe(name)
    const phases: string[] = []
    let phaseStart = Date.now()
    const phase = (label: string) => {
      phases.push(`${label} ${Date.now() - phaseStart} ms`)
      phaseStart = Date.now()
    }
    try {
      candidates = await Promise.all(
        ['a', 'b', 'c'].map((id) => startCandidate(id, env(RESTART_SESSION_MS), name, RESTART_SESSION_MS)),
      )
      const first = await nextLeader(observer)
      phase('first leader')
      const zk = server.servers[0]!
      await zk.kill()
      const leader = candidates.find((c) => c.id === first.id)!
      await until(async () => !(await leader.status()).leading, 'the leader to step down by its clock', 20_000)
      phase('step-down')
      await sleep(RESTART_SESSION_MS)
      await zk.restart()
      phase('restart')
      // This process's own client may have lost its session in the outage (a dead client): observe on a new one.
      const after = await connectZooKeeper(server.connectionString, { sessionTimeout: 2_000 })
      const afterLocks = createLocks<unknown>({ zookeeper: after })
      const observerErrors: string[] = []
      const fresh = afterLocks.observe(name, { onError: (error) => observerErrors.push(String(error)) })
      try {
        const survivor = await exactlyOneLeader(candidates, fresh, 60_000).catch((error: Error) => {
          throw new Error(
            `${error.message}; the observer's read errors: ${observerErrors.length} (last: ${observerErrors.at(-1)})`,
          )
        })
        phase('one leader')
        expect(fresh.leader!.term).toBeGreaterThan(first.term)
        const fence = await readFence(check)
        expectNoOverlap(fence)
        console.log(
          `[election zookeeper restart] term ${first.term} (${first.id}) → ${fresh.leader!.term} (${survivor.id}); phases: ${phases.join(', ')}; candidates' sessions expired / clients replaced (3 session timeouts without a reconnect): ${JSON.stringify(
            await Promise.all(
              candidates.map(async (c) => {
                const s = await c.status()
                return [s.sessionExpired, s.clientsReplaced]
              }),
            ),
          )}; fence ${JSON.stringify({ ...fence, log: undefined })}`,
        )
      } finally {
        await fresh.close()
        await afterLocks.close()
        after.close()
      }
    } finally {
      await observer.close()
    }
  }, 180_000)
})
