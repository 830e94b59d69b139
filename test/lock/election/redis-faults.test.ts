/**
 * Leader election on Redis across processes, under faults: a leader SIGSTOPped past its
 * lease, leaders SIGKILLed one after another, the Redis server killed and restarted. Every
 * leader writes its term to a fenced resource (fenced-resource.ts) on a second server.
 */
import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'
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

const LEASE_MS = 1_000
/** Leaders killed, one every 2 s: 5 by default (about 15 s); `npm run load:election` kills 15 (30 s). */

describe.skipIf(!redisAvailable)('leader election across processes (Redis)', () => {
  let store: RedisServer
  let checkServer: RedisServer
  let check: Redis
  let locks: Locks
  let candidates: Candidate[] = []
  let count = 0
  const env = () => ({ LOCK_BACKEND: 'redis', REDIS_URL: store.url, CHECK_URL: checkServer.url })

  beforeAll(async () => {
    ;[store, checkServer] = await Promise.all([startRedis(), startRedis()])
    check = checkServer.client()
    const client = store.client()
    client.on('error', () => {}) // the store is killed in one test: its outage is the point
    locks = createLocks({ redis: client })
  })
  afterAll(async () => {
    await locks?.close()
    await Promise.all([store?.stop(), checkServer?.stop()])
  })
  afterEach(async () => {
    await Promise.all(candidates.map((c) => c.worker.stop()))
    candidates = []
    await resetFence(check)
  })

  it('a leader SIGSTOPped past its lease: a new leader with a higher term; the old one says no the moment it resumes', async () => {
    const name = `stopped-${++count}`
    const observer = locks.observe(name)
    try {
      candidates = await Promise.all(['a', 'b'].map((id) => startCandidate(id, env(), name, LEASE_MS)))
      const { first, second, status } = await pauseTheLeader(candidates, observer, check)
      const fence = await readFence(check)
      expect(fence.log).toEqual([`${first.term} ${first.id}`, `${second.term} ${second.id}`])
      console.log(
        `[election redis SIGSTOP] term ${first.term} (${first.id}) → ${second.term} (${second.id}); old leader learnt it by ${status.clockStepDowns > 0 ? 'its clock check' : 'its signal'}; fence ${JSON.stringify({ ...fence, log: undefined })}`,
      )
    } finally {
      await observer.close()
    }
  })

  it(
    '5 candidates in 5 processes, the leader SIGKILLed every 2 s: never two leaders, terms only grow',
    () =>
      runKillLoop({
        label: 'election redis kill loop',
        name: `killed-${++count}`,
        observe: (name) => locks.observe(name),
        spawn: (id, name) => startCandidate(id, env(), name, LEASE_MS),
        check,
        candidates,
      }),
    60_000 + 8_000 * KILL_ROUNDS,
  )

  it('the Redis server killed under the leader: it steps down by its clock; after the restart exactly one leads, with a higher term', async () => {
    const name = `store-killed-${++count}`
    const observer = locks.observe(name)
    try {
      candidates = await Promise.all(['a', 'b', 'c'].map((id) => startCandidate(id, env(), name, LEASE_MS)))
      const first = await nextLeader(observer)
      await store.kill()
      const leader = candidates.find((c) => c.id === first.id)!
      // Down for two leases: the leader cannot renew, and must know it no longer leads.
      await until(async () => !(await leader.status()).leading, 'the leader to step down', 10_000)
      const stepDown = (await leader.status()).terms.find((t) => t.term === first.term.toString())!
      expect(stepDown.endedAt).toBeDefined()
      await sleep(2 * LEASE_MS)
      await store.restart()
      const next = await nextLeader(observer, first)
      expect(next.term).toBeGreaterThan(first.term) // tokens follow the server clock: a restart empty does not reset them
      await exactlyOneLeader(candidates, observer)
      expectNoOverlap(await readFence(check))
    } finally {
      await observer.close()
    }
  }, 60_000)
})
