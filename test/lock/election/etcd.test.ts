/**
 * Leader election on etcd across processes: five candidates campaigning at once (the
 * etcd3 `Election` that elected several, microsoft/etcd3 #176, #158), observe reporting
 * exactly the leaders the candidates were told (etcd #18163), a waiting candidate whose
 * lease expired (a phantom leader, holster #38), the leader SIGSTOPped past its lease,
 * leaders SIGKILLed every 2 s, the member the leader talks to SIGSTOPped or killed, and an
 * etcd restart. Every leader writes its term to a fenced resource in Redis.
 */
import type { Etcd3 } from 'etcd3'
import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, type Leader, type Locks } from '../../../src/lock/index.js'
import { etcdAvailable, startEtcd, startEtcdCluster, type EtcdCluster } from '../../support/etcd.js'
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
/** Leaders killed, one every 2 s (about 10 s of kills). */

describe.skipIf(!etcdAvailable || !redisAvailable)('leader election across processes (etcd)', () => {
  let etcd: EtcdCluster
  let checkServer: RedisServer
  let check: Redis
  let client: Etcd3
  let locks: Locks<unknown>
  let candidates: Candidate[] = []
  let count = 0
  const env = (hosts = etcd.hosts) => ({
    LOCK_BACKEND: 'etcd',
    ETCD_HOSTS: hosts.join(','),
    CHECK_URL: checkServer.url,
  })

  beforeAll(async () => {
    ;[etcd, checkServer] = await Promise.all([startEtcd(), startRedis()])
    check = checkServer.client()
    client = etcd.client()
    locks = createLocks<unknown>({ etcd: client })
  })
  afterAll(async () => {
    await locks?.close()
    await Promise.all([etcd?.stop(), checkServer?.stop()])
  })
  afterEach(async () => {
    await Promise.all(candidates.map((c) => c.worker.stop()))
    candidates = []
    await resetFence(check)
  })

  it('5 candidates campaigning at once elect exactly one; each resignation elects exactly the next, as observed', async () => {
    const name = `five-${++count}`
    const observer = locks.observe(name)
    const seen: (Leader | undefined)[] = []
    const reading = (async () => {
      for await (const leader of observer) seen.push(leader)
    })()
    try {
      candidates = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => startCandidate(id, env(), name, LEASE_MS)))
      const told: string[] = []
      let leader = await exactlyOneLeader(candidates, observer)
      for (let round = 0; round < 4; round++) {
        const status = await leader.status()
        told.push(`${status.terms.at(-1)!.term} ${leader.id}`)
        const previous = observer.leader!
        await leader.worker.request({ op: 'resign' })
        await nextLeader(observer, previous)
        leader = await exactlyOneLeader(candidates, observer)
      }
      told.push(`${(await leader.status()).terms.at(-1)!.term} ${leader.id}`)
      const fence = await readFence(check)
      expectNoOverlap(fence)
      // The observer reported exactly the terms the candidates were told, in order (a term may
      // have ended between two reads and been skipped, never reported wrong).
      const observed = seen.filter((l): l is Leader => l !== undefined).map((l) => `${l.term} ${l.id}`)
      expect(observed.every((entry) => told.includes(entry))).toBe(true)
      expect(observed.at(-1)).toBe(told.at(-1))
      expect(fence.log.filter((entry) => told.includes(entry))).toEqual(told)
    } finally {
      await observer.close()
      await reading
    }
  }, 60_000)

  it('a waiting candidate whose lease expired is not elected on its dead key (no phantom leader)', async () => {
    const name = `phantom-${++count}`
    const observer = locks.observe(name)
    try {
      const a = await startCandidate('a', env(), name, LEASE_MS)
      candidates.push(a)
      await nextLeader(observer)
      const b = await startCandidate('b', env(), name, LEASE_MS)
      candidates.push(b)
      const queue = `sg-lock:election/${name}/`
      await until(async () => (await client.getAll().prefix(queue).count()) === 2, 'b to queue')
      b.worker.kill('SIGSTOP')
      try {
        // b's lease (1 s TTL, not kept alive while it is stopped) expires; etcd deletes its key.
        await until(async () => (await client.getAll().prefix(queue).count()) === 1, "b's key to expire", 10_000)
        const c = await startCandidate('c', env(), name, LEASE_MS)
        candidates.push(c)
        await until(async () => (await client.getAll().prefix(queue).count()) === 2, 'c to queue')
        const first = observer.leader!
        await a.worker.request({ op: 'resign' })
        const next = await nextLeader(observer, first)
        expect(next.id).toBe('c')
      } finally {
        b.worker.kill('SIGCONT')
      }
      // b campaigns again with a fresh key; it never led on the expired one.
      await until(async () => (await client.getAll().prefix(queue).count()) >= 2, 'b to queue again', 10_000)
      const bStatus = await b.status()
      expect(bStatus.terms).toEqual([])
      expect(observer.leader?.id).toBe('c')
      await exactlyOneLeader(candidates, observer)
      expectNoOverlap(await readFence(check))
    } finally {
      await observer.close()
    }
  }, 60_000)

  it('a leader SIGSTOPped past its lease: a new leader with a higher term; the old one says no the moment it resumes', async () => {
    const name = `stopped-${++count}`
    const observer = locks.observe(name)
    try {
      candidates = await Promise.all(['a', 'b'].map((id) => startCandidate(id, env(), name, LEASE_MS)))
      const { first, second, status } = await pauseTheLeader(candidates, observer, check)
      const fence = await readFence(check)
      // Later terms may follow (a lease missed under load, a re-election): these two come first.
      expect(fence.log.slice(0, 2)).toEqual([`${first.term} ${first.id}`, `${second.term} ${second.id}`])
      await exactlyOneLeader(candidates, observer)
      console.log(
        `[election etcd SIGSTOP] term ${first.term} (${first.id}) → ${second.term} (${second.id}); old leader learnt it by ${status.clockStepDowns > 0 ? 'its clock check' : 'its signal'}; fence ${JSON.stringify({ ...fence, log: undefined })}`,
      )
    } finally {
      await observer.close()
    }
  }, 60_000)

  it(
    '5 candidates in 5 processes, the leader SIGKILLed every 2 s: never two leaders, terms only grow',
    () =>
      runKillLoop({
        label: 'election etcd kill loop',
        name: `killed-${++count}`,
        observe: (name) => locks.observe(name),
        spawn: (id, name) => startCandidate(id, env(), name, LEASE_MS),
        check,
        candidates,
      }),
    60_000 + 10_000 * KILL_ROUNDS,
  )

  it('after an etcd restart exactly one leader, with a higher term', async () => {
    const name = `restart-${++count}`
    const observer = locks.observe(name)
    try {
      candidates = await Promise.all(['a', 'b', 'c'].map((id) => startCandidate(id, env(), name, LEASE_MS)))
      const first = await nextLeader(observer)
      const member = etcd.members[0]!
      await member.kill()
      const leader = candidates.find((c) => c.id === first.id)!
      await until(async () => !(await leader.status()).leading, 'the leader to step down by its clock', 10_000)
      await sleep(2 * LEASE_MS)
      await member.restart()
      await nextLeader(observer, first, 30_000)
      const survivor = await exactlyOneLeader(candidates, observer, 30_000)
      const fence = await readFence(check)
      expectNoOverlap(fence)
      console.log(
        `[election etcd restart] term ${first.term} (${first.id}) → ${observer.leader!.term} (${survivor.id}); fence ${JSON.stringify({ ...fence, log: undefined })}`,
      )
    } finally {
      await observer.close()
    }
  }, 90_000)
})

describe.skipIf(!etcdAvailable || !redisAvailable)('leader election across processes (3-member etcd)', () => {
  let cluster: EtcdCluster
  let checkServer: RedisServer
  let candidates: Candidate[] = []

  beforeAll(async () => {
    ;[cluster, checkServer] = await Promise.all([startEtcdCluster(3), startRedis()])
  })
  afterAll(async () => {
    await Promise.all(candidates.map((c) => c.worker.stop()))
    await Promise.all([cluster?.stop(), checkServer?.stop()])
  })

  it('the member the leader talks to is SIGSTOPped past the lease: a candidate on another member leads with a higher term, never two at once', async () => {
    const name = 'member-stopped'
    const check = checkServer.client()
    candidates = await Promise.all(
      cluster.members.map((member) =>
        startCandidate(
          `on-${member.name}`,
          { LOCK_BACKEND: 'etcd', ETCD_HOSTS: member.url, CHECK_URL: checkServer.url },
          name,
          LEASE_MS,
        ),
      ),
    )
    const locks = createLocks<unknown>({ etcd: cluster.client() })
    const observer = locks.observe(name)
    let others: Locks<unknown> | undefined
    let othersObserver: ReturnType<Locks<unknown>['observe']> | undefined
    try {
      const first = await nextLeader(observer)
      const leader = candidates.find((c) => c.id === first.id)!
      const member = cluster.members.find((m) => first.id === `on-${m.name}`)!
      // From here on the test observes through the other two members only: an etcd3 client
      // whose calls go to the stopped member hangs there (each read times out, the last
      // reading stands), which would measure the client, not the election.
      others = createLocks<unknown>({ etcd: cluster.client({ members: cluster.members.filter((m) => m !== member) }) })
      othersObserver = others.observe(name)
      await until(() => othersObserver!.leader?.term === first.term, 'the second observer to see the leader')
      member.pause()
      let next: Leader
      try {
        // Its keep-alives stop reaching the cluster: the lease runs out there, and by its clock here.
        await until(async () => !(await leader.status()).leading, 'the leader to step down by its clock', 15_000)
        next = await nextLeader(othersObserver, first, 30_000)
        await until(async () => (await readFence(check)).terms >= 2, 'the new term to write', 15_000)
      } finally {
        member.resume()
      }
      expect(next.id).not.toBe(first.id)
      expect(next.term).toBeGreaterThan(first.term)
      await exactlyOneLeader(candidates, othersObserver, 30_000)
      const fence = await readFence(check)
      expectNoOverlap(fence)
      expect(fence.fenced).toBe(0)
      console.log(
        `[election etcd member SIGSTOP] ${member.name} under term ${first.term} (${first.id}) → ${next.term} (${next.id}); fence ${JSON.stringify({ ...fence, log: undefined })}`,
      )
    } finally {
      await othersObserver?.close()
      await others?.close()
      await observer.close()
      await locks.close()
      await Promise.all(candidates.splice(0).map((c) => c.worker.stop()))
      await resetFence(check)
      check.disconnect()
    }
  }, 90_000)

  it('the member the leader talks to is killed: it steps down, a candidate on another member leads with a higher term', async () => {
    const name = 'member-killed'
    const check = checkServer.client()
    // Each candidate talks to one member only; the observer to all of them.
    candidates = await Promise.all(
      cluster.members.map((member, i) =>
        startCandidate(
          `on-${member.name}`,
          { LOCK_BACKEND: 'etcd', ETCD_HOSTS: member.url, CHECK_URL: checkServer.url, N: String(i) },
          name,
          LEASE_MS,
        ),
      ),
    )
    const locks = createLocks<unknown>({ etcd: cluster.client() })
    const observer = locks.observe(name)
    try {
      const first = await nextLeader(observer)
      const leader = candidates.find((c) => c.id === first.id)!
      const member = cluster.members.find((m) => first.id === `on-${m.name}`)!
      await member.kill()
      await until(async () => !(await leader.status()).leading, 'the leader to step down', 10_000)
      const next = await nextLeader(observer, first, 30_000)
      expect(next.id).not.toBe(first.id)
      expect(next.term).toBeGreaterThan(first.term)
      await exactlyOneLeader(
        candidates.filter((c) => c !== leader),
        observer,
      )
      const fence = await readFence(check)
      expectNoOverlap(fence)
      console.log(
        `[election etcd member killed] ${member.name} under term ${first.term} (${first.id}) → ${next.term} (${next.id}); fence ${JSON.stringify({ ...fence, log: undefined })}`,
      )
    } finally {
      await observer.close()
      await locks.close()
    }
  }, 90_000)
})
