import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { redisAvailable, parseInfo } from '../support/redis.js'
import { redisCliBinary, startCluster, type RedisClusterHandle } from '../support/redis-cluster.js'
import { gate, sleep, until } from '../support/timing.js'

const ci = process.env.CI === 'true'
const NAMESPACE = 'fence'
const KEY = 'account:1'
const ENTRY = `${NAMESPACE}:{k:${KEY}}`

describe.skipIf(!redisAvailable || (!redisCliBinary && !ci))(
  'fencing tokens across a failover that lost the last writes',
  () => {
    let cluster: RedisClusterHandle
    const caches: Cache[] = []
    const gates: ReturnType<typeof gate>[] = [] // opened in afterAll too, so a failed assertion cannot leave a loader hanging
    beforeAll(async () => {
      cluster = await startCluster({ masters: 3, replicas: 1 })
    })
    afterAll(async () => {
      for (const held of gates) held.open()
      await Promise.all(caches.map((cache) => cache.close()))
      await cluster?.stop()
    })
    const cache = () => {
      const client = cluster.client()
      client.on('error', () => {})
      const created = createCache({ redis: client, ttl: '30s', l1: false, namespace: NAMESPACE })
      caches.push(created)
      return created
    }
    const tokenOf = (lockValue: string | null) => BigInt(lockValue?.split(':')[1] ?? '-1')

    it('the promoted replica, whose token counter is behind, still hands out a higher token: tokens follow the server clock (µs)', async () => {
      const [first, old, fresh] = [cache(), cache(), cache()]
      // The entry hash (and its token counter) exists everywhere, its value no longer fresh (kept as a fail-safe fallback).
      await first.getOrLoad(KEY, async () => 'v1', { ttl: 100, staleIfError: '60s' })
      await sleep(150) // past its ttl
      const { master, replicas } = await cluster.ownerOf(ENTRY)
      const replica = replicas[0]!
      const offset = Number(parseInfo(await cluster.admin(master).info('replication')).master_repl_offset)
      await until(
        async () => Number(parseInfo(await cluster.admin(replica).info('replication')).slave_repl_offset) >= offset,
        'the replica to have the entry',
      )

      // Cut replication: the replica stops, and its link is dropped before anything else is written.
      replica.pause()
      await cluster.admin(master).call('CLIENT', 'KILL', 'TYPE', 'replica')
      const oldLoad = gate()
      gates.push(oldLoad)
      const oldValue = old.getOrLoad(KEY, async () => {
        await oldLoad.promise
        return 'old'
      })
      await until(
        async () => (await cluster.admin(master).exists(`${ENTRY}:lock`)) === 1,
        'the old leader to hold the lock',
      )
      const t1 = tokenOf(await cluster.admin(master).get(`${ENTRY}:lock`))
      const lostCounter = BigInt((await cluster.admin(master).hget(ENTRY, 'c'))!)
      expect(lostCounter).toBe(t1)

      // The master dies with those writes; the stale replica is promoted.
      await master.kill()
      replica.resume()
      await cluster.waitForMaster(replica)
      const survivingCounter = BigInt((await cluster.admin(replica).hget(ENTRY, 'c')) ?? '0')
      expect(survivingCounter).toBeLessThan(t1) // the counter really was lost: counting on from it would repeat t1

      const freshLoad = gate()
      gates.push(freshLoad)
      const freshValue = fresh.getOrLoad(KEY, async () => {
        await freshLoad.promise
        return 'new'
      })
      await until(
        async () => (await cluster.admin(replica).exists(`${ENTRY}:lock`)) === 1,
        'the new leader to hold the lock',
      )
      const t2 = tokenOf(await cluster.admin(replica).get(`${ENTRY}:lock`))
      const [seconds, micros] = (await cluster.admin(replica).time()) as unknown as [string, string]
      expect(t2).toBeGreaterThan(t1)
      expect(t2).toBeLessThanOrEqual(BigInt(seconds) * 1_000_000n + BigInt(micros)) // it is the server clock that put it there

      // The older load commits first, then the newer: the newer value wins (with a repeated token it was refused).
      oldLoad.open()
      expect(await oldValue).toBe('old')
      freshLoad.open()
      expect(await freshValue).toBe('new')
      expect(await first.getOrLoad(KEY, async () => 'reloaded')).toBe('new')

      await master.restart()
      await cluster.waitHealthy()
    })
  },
)
