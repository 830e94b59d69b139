/**
 * withLock's Redis backend on a Redis Cluster of 3 masters + 3 replicas (one cluster for
 * the file): one holder at a time across processes, wake-up by sharded pub/sub (counted
 * per node), keys in one slot per lock, and failovers under contention: a graceful
 * CLUSTER FAILOVER, a SIGKILL of the lock's master with waitForReplicas, an acquisition
 * that rides a SIGKILL failover, and the lock async replication loses when the master dies
 * before replicating it.
 */
import { describe, expect, it } from 'vitest'
import { LockBusyError, RedisUnavailableError, type Locks } from '../../../src/index.js'
import { lockKeys } from '../../../src/lock/redis/keys.js'
import { redisAvailable, type RedisServer } from '../../support/redis.js'
import { redisCliBinary, startCluster } from '../../support/redis-cluster.js'
import { until } from '../../support/timing.js'
import {
  commandCalls,
  contendThroughFailover,
  expectOneHolderAtATime,
  expectWokenByNotification,
  useHaLocks,
} from './ha-scenarios.js'

const ci = process.env.CI === 'true'
const NAMESPACE = 'coupons'
const LEASE_MS = 5_000 // outlasts a SIGKILL failover (cluster-node-timeout 1 s + election)

describe.skipIf(!redisAvailable || (!redisCliBinary && !ci))(
  'withLock on Redis Cluster (3 masters + 3 replicas)',
  () => {
    const {
      topology: cluster,
      check,
      fork,
      newLocks,
    } = useHaLocks(
      NAMESPACE,
      () => startCluster({ masters: 3, replicas: 1 }),
      (c) => ({ cluster: c.startupNodes }),
    )
    const names = (key: string) => lockKeys(NAMESPACE, key)
    const resetStats = () =>
      Promise.all(
        cluster()
          .nodes.filter((n) => n.running)
          .map((node) => cluster().admin(node).config('RESETSTAT')),
      )
    const callsPerNode = (command: string) =>
      Promise.all(
        cluster()
          .nodes.filter((n) => n.running)
          .map((node) => commandCalls(cluster().admin(node), command)),
      )
    const sum = (list: number[]) => list.reduce((a, b) => a + b, 0)

    it("a lock's names (lock, token counter, channel) share one hash tag: one slot, so each script touches one node", async () => {
      const admin = cluster().admin(cluster().nodes[0]!)
      for (const key of ['mutex', 'coupon:42', 'odd{brace}key']) {
        const { lock, counter, channel } = names(key)
        const slots = await Promise.all([lock, counter, channel].map((name) => admin.call('CLUSTER', 'KEYSLOT', name)))
        expect(new Set(slots).size).toBe(1)
      }
      // Keys with different tags spread over the masters.
      const owners = await Promise.all(
        ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map(
          async (key) => (await cluster().ownerOf(names(key).lock)).master.port,
        ),
      )
      expect(new Set(owners).size).toBeGreaterThan(1)
    })

    it('batched renewals and polls split by hash tag: locks over every master stay held, and a lock gone without a message is found by the poll', async () => {
      const holderLocks = newLocks()
      const keys = Array.from({ length: 30 }, (_, i) => `batch:${i}`)
      const held = await Promise.all(keys.map((key) => holderLocks.acquire(key, { lease: 600 })))
      const owners = await Promise.all(keys.map(async (key) => (await cluster().ownerOf(names(key).lock)).master.port))
      expect(new Set(owners).size).toBe(3)
      await new Promise((resolve) => setTimeout(resolve, 1_500)) // several renewal rounds (one CROSSSLOT would lose a lock)
      expect(held.filter((handle) => handle.signal.aborted).length).toBe(0)
      // A waiter on each of 3 keys; their locks then vanish without a release message (the
      // holder's renewals find them gone and never take them back).
      const waiterLocks = newLocks()
      const waits = keys.slice(0, 3).map((key) => waiterLocks.acquire(key, { wait: '20s' }))
      await new Promise((resolve) => setTimeout(resolve, 300))
      await Promise.all(
        keys.slice(0, 3).map(async (key) =>
          cluster()
            .admin((await cluster().ownerOf(names(key).lock)).master)
            .del(names(key).lock),
        ),
      )
      const acquired = await Promise.all(waits)
      expect(acquired.map((handle) => handle.key)).toEqual(keys.slice(0, 3))
      await Promise.all([...acquired, ...held].map((handle) => handle.release().catch(() => {})))
    }, 60_000)

    it("8 processes contending for one key: never two holders at once; every release SPUBLISHes on the lock's master only (no PUBLISH anywhere)", async () => {
      const contenders = await fork(8)
      await resetStats()
      const iterations = 20
      await expectOneHolderAtATime(contenders, check(), 'mutex', iterations)
      const { master } = await cluster().ownerOf(names('mutex').lock)
      const running = cluster().nodes.filter((n) => n.running)
      const spublish = await callsPerNode('spublish')
      const onOwner = spublish[running.indexOf(master)]!
      expect(onOwner).toBeGreaterThanOrEqual(8 * iterations) // each holder's release, inside release.lua
      expect(sum(spublish)).toBe(onOwner) // sharded: no other node saw a publish command
      expect(sum(await callsPerNode('publish'))).toBe(0)
      console.log(`[cluster contend] spublish per node ${JSON.stringify(spublish)}, publish 0`)
    }, 240_000)

    it("waiters SSUBSCRIBE on the lock's shard and are woken by the release: no polling while held", async () => {
      const waiters = await fork(4)
      const holderLocks = newLocks()
      const key = 'notify'
      const holder = await holderLocks.acquire(key, { lease: LEASE_MS })
      const { master } = await cluster().ownerOf(names(key).lock)
      await resetStats()
      const scriptCalls = async () => sum(await callsPerNode('evalsha')) + sum(await callsPerNode('eval'))
      const { during, handoffMs } = await expectWokenByNotification({
        workers: waiters,
        holder,
        key,
        lease: LEASE_MS,
        // The channel is sharded: only SHARDNUMSUB on its own master counts its subscribers.
        subscribers: async () =>
          Number(
            ((await cluster().admin(master).call('PUBSUB', 'SHARDNUMSUB', names(key).channel)) as [string, number])[1],
          ),
        scriptCalls,
      })
      expect(sum(await callsPerNode('ssubscribe'))).toBeGreaterThan(0)
      expect(sum(await callsPerNode('subscribe'))).toBe(0)
      console.log(
        `[cluster notify] ${during} script calls in 2 s of holding with 4 waiters; hand-off ${handoffMs.toFixed(1)} ms`,
      )
    }, 120_000)

    it("CLUSTER FAILOVER of the lock's master under contention (4 processes): never two holders at once", async () => {
      const contenders = await fork(4)
      const { lock } = names('graceful')
      const result = await contendThroughFailover({
        workers: contenders,
        check: check(),
        key: 'graceful',
        lease: LEASE_MS,
        failover: async () => {
          const { replicas } = await cluster().ownerOf(lock)
          await cluster().failover(replicas[0]!)
        },
      })
      console.log(
        `[cluster graceful failover] ${result.entries} entries, ${result.violations} violations, ` +
          `${result.errors.length} failed calls, failover ${result.failoverMs.toFixed(0)} ms`,
        result.errors.slice(0, 3),
      )
      expect(result.violations).toBe(0)
      await cluster().waitHealthy()
    }, 180_000)

    it("SIGKILL of the lock's master under contention, with waitForReplicas (4 processes): never two holders at once", async () => {
      const contenders = await fork(4, { timeout: 200 })
      const { lock } = names('killed')
      let killed: RedisServer | undefined
      const result = await contendThroughFailover({
        workers: contenders,
        check: check(),
        key: 'killed',
        lease: LEASE_MS,
        // The promoted replica has no replica of its own until the old master is back: until
        // then strict waitForReplicas refuses every lock (no lock a second failover would lose).
        failover: async () => {
          const { master, replicas } = await cluster().ownerOf(lock)
          killed = master
          await master.kill()
          await cluster().waitForMaster(replicas[0]!)
          await master.restart() // rejoins as a replica of the promoted node
          await cluster().waitHealthy()
        },
      }).finally(async () => {
        if (killed && !killed.running) await killed.restart()
      })
      console.log(
        `[cluster sigkill, waitForReplicas] ${result.entries} entries, ${result.violations} violations, ` +
          `${result.errors.length} failed calls, failover + rejoin ${result.failoverMs.toFixed(0)} ms`,
        result.errors.slice(0, 3),
      )
      expect(result.violations).toBe(0)
      await cluster().waitHealthy()
    }, 180_000)

    it("acquire() rides a SIGKILL of the lock's master within its wait; tryAcquire and a wait shorter than the outage get the typed RedisUnavailableError, within wait + commandTimeout", async () => {
      const key = 'ride'
      const { lock } = names(key)
      const { master, replicas } = await cluster().ownerOf(lock)
      const [quick, short, patient] = [newLocks(), newLocks(), newLocks()] // one Locks each: a Locks queues its own acquisitions of a key
      for (const locks of [quick, short, patient])
        await (await locks.acquire(key, { lease: LEASE_MS, wait: '5s' })).release() // connected, slots known
      const before = await patient.acquire(key, { lease: LEASE_MS, wait: 0 })
      await before.release()
      await master.kill() // the replica takes over after cluster-node-timeout (1 s) and an election
      try {
        const startedAt = performance.now()
        const elapsed = <T>(call: Promise<T>) =>
          call.then(
            (value) => ({ value, ms: performance.now() - startedAt }),
            (error: unknown) => ({ error, ms: performance.now() - startedAt }),
          )
        const [tried, waited, rode] = await Promise.all([
          elapsed(quick.tryAcquire(key)),
          elapsed(short.acquire(key, { wait: 300 })),
          elapsed(patient.acquire(key, { lease: LEASE_MS, wait: '20s' })),
        ])
        console.log(
          `[cluster ride] tryAcquire ${tried.ms.toFixed(0)} ms, wait 300 ms: ${waited.ms.toFixed(0)} ms, wait 20 s: lock after ${rode.ms.toFixed(0)} ms`,
        )
        expect('error' in tried && tried.error).toBeInstanceOf(RedisUnavailableError)
        expect('error' in waited && waited.error).toBeInstanceOf(RedisUnavailableError)
        expect(waited.ms).toBeLessThan(300 + 1_000 + 500) // the wait, one command's timeout (1 s) and slack
        expect('value' in rode).toBe(true)
        const held = (rode as { value: Awaited<ReturnType<Locks['acquire']>> }).value
        expect(held.token).toBeGreaterThan(before.token)
        // The client found the promoted replica; the node ownerOf asks may not have heard yet (failed: 'no live master serves slot').
        await cluster().waitForMaster(replicas[0]!)
        expect((await cluster().ownerOf(lock)).master).toBe(replicas[0]) // taken on the promoted replica
        await held.release()
      } finally {
        await master.restart()
      }
      await cluster().waitHealthy()
    }, 120_000)

    it('async replication can lose a lock: the master dies before replicating it and a second holder gets in (the token still rises); strict waitForReplicas refuses such a lock', async () => {
      const key = 'lost'
      const { lock } = names(key)
      const { master, replicas } = await cluster().ownerOf(lock)
      const replica = replicas[0]!
      // Every client connected, slots known, before the replica stops: a new Cluster client asks a
      // random startup node for its slots, and a paused one never answers (the acquire timed out).
      const [strict, firstLocks, secondLocks] = [newLocks({ timeout: 100 }), newLocks(), newLocks()]
      for (const locks of [strict, firstLocks, secondLocks]) await (await locks.acquire(key, { wait: '5s' })).release()
      // Cut replication: the replica stops, and its link is dropped before the lock is written.
      replica.pause()
      try {
        await cluster().admin(master).call('CLIENT', 'KILL', 'TYPE', 'replica')
        // With waitForReplicas the lock is taken, not acknowledged, released at once: not acquired.
        await cluster().admin(master).config('RESETSTAT')
        await expect(strict.acquire(key, { wait: 400 })).rejects.toBeInstanceOf(LockBusyError)
        expect(await cluster().admin(master).exists(lock)).toBe(0) // given back, not left to expire
        expect(await commandCalls(cluster().admin(master), 'wait')).toBeGreaterThanOrEqual(1)

        // Without it, the lock is taken on the master alone.
        // A long lease: its first renewal (lease/3 = 10 s) comes well after the failover (~3 s),
        // so the first holder still believes it holds the lock when the second gets in.
        const first = await firstLocks.acquire(key, { lease: '30s', wait: 0 })
        expect(await cluster().admin(master).exists(lock)).toBe(1)
        await master.kill()
        replica.resume()
        await cluster().waitForMaster(replica)
        expect(await cluster().admin(replica).exists(lock)).toBe(0) // lost with the old master

        // A second holder gets in while the first still believes it holds the lock.
        const second = await secondLocks.acquire(key, { lease: LEASE_MS, wait: '10s' }) // acquire() retries what the failover left (MOVED, CLUSTERDOWN)
        expect(first.signal.aborted).toBe(false)
        expect(second.token).toBeGreaterThan(first.token) // fencing still orders them (server clock, µs)
        // The first learns it at its next renewal (lease/3): its signal aborts with LockLostError.
        await until(() => first.signal.aborted, 'the first holder to see its loss', 25_000)
        expect((first.signal.reason as Error).name).toBe('LockLostError')
        await second.release()
        await first.release().catch(() => {})
      } finally {
        replica.resume()
        if (!master.running) await master.restart()
      }
      await cluster().waitHealthy()
    }, 120_000)
  },
)
