/**
 * withLock's Redis backend through an ioredis Sentinel client (1 primary, 1 replica,
 * 3 sentinels; one set-up for the file): one holder at a time across processes, wake-up
 * by (classic) pub/sub, strict waitForReplicas, and a Sentinel failover under contention.
 */
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { lockKeys } from '../../../src/lock/redis/keys.js'
import { redisAvailable } from '../../support/redis.js'
import { startSentinel } from '../../support/redis-sentinel.js'
import {
  commandCalls,
  contendThroughFailover,
  expectOneHolderAtATime,
  expectWokenByNotification,
  useHaLocks,
} from './ha-scenarios.js'

const NAMESPACE = 'coupons'
const LEASE_MS = 5_000

describe.skipIf(!redisAvailable)('withLock through Redis Sentinel (primary + replica + 3 sentinels)', () => {
  const {
    topology: sentinel,
    check,
    fork,
    newLocks,
  } = useHaLocks(NAMESPACE, startSentinel, (s) => ({ sentinels: s.sentinelNodes, name: s.masterName }))

  it('6 processes contending for one key: never two holders at once', async () => {
    await expectOneHolderAtATime(await fork(6), check(), 'mutex', 20)
  }, 240_000)

  it('waiters are woken by the release notification (classic pub/sub: not a Cluster) and do not poll while held', async () => {
    const waiters = await fork(3)
    const key = 'notify'
    const holder = await newLocks().acquire(key, { lease: LEASE_MS })
    const primary = sentinel().admin(await sentinel().primary())
    await primary.config('RESETSTAT')
    const { during, handoffMs } = await expectWokenByNotification({
      workers: waiters,
      holder,
      key,
      lease: LEASE_MS,
      subscribers: async () =>
        Number(((await primary.pubsub('NUMSUB', lockKeys(NAMESPACE, key).channel)) as [string, number])[1]),
      scriptCalls: async () => (await commandCalls(primary, 'evalsha')) + (await commandCalls(primary, 'eval')),
    })
    expect(await commandCalls(primary, 'publish')).toBeGreaterThanOrEqual(3)
    expect(await commandCalls(primary, 'spublish')).toBe(0)
    console.log(
      `[sentinel notify] ${during} script calls in 2 s of holding with 3 waiters; hand-off ${handoffMs.toFixed(1)} ms`,
    )
  }, 120_000)

  it('waitForReplicas: fn runs only once the replica has the lock (WAIT in the same round trip); a replica that does not answer means not acquired', async () => {
    const durable = newLocks({ timeout: 2_000 })
    const primaryServer = await sentinel().primary()
    const replicaServer = sentinel().servers.find((s) => s !== primaryServer)!
    const primary = sentinel().admin(primaryServer)
    await primary.config('RESETSTAT')
    const { lock } = lockKeys(NAMESPACE, 'durable')
    const seen = await durable.withLock('durable', async () => sentinel().admin(replicaServer).get(lock))
    expect(seen).toMatch(/^[0-9a-f]{32}:\d+$/)
    expect(await commandCalls(primary, 'wait')).toBe(1)

    const strict = newLocks({ timeout: 100 })
    replicaServer.pause()
    try {
      await expect(strict.withLock('durable', async () => 'ran', { wait: 300 })).rejects.toMatchObject({
        code: 'ERR_SG_LOCK_BUSY',
      })
      expect(await primary.exists(lock)).toBe(0) // the unacknowledged lock was given back
    } finally {
      replicaServer.resume()
    }
  }, 60_000)

  it('SENTINEL FAILOVER under contention (4 processes, waitForReplicas): never two holders at once', async () => {
    const result = await contendThroughFailover({
      workers: await fork(4, { timeout: 200 }),
      check: check(),
      key: 'failover',
      lease: LEASE_MS,
      failover: async () => {
        await sentinel().failover()
      },
    })
    console.log(
      `[sentinel failover, waitForReplicas] ${result.entries} entries, ${result.violations} ` +
        `violations, ${result.errors.length} failed calls, failover ${result.failoverMs.toFixed(0)} ms`,
      result.errors.slice(0, 3),
    )
    expect(result.violations).toBe(0)
  }, 180_000)

  it('rejects bad Redis options with the option named', () => {
    const client = sentinel().client()
    expect(() => createLocks({ redis: { client, waitForReplicas: { replicas: 0 } } })).toThrow(
      expect.objectContaining({ argument: 'redis.waitForReplicas.replicas' }),
    )
    expect(() => createLocks({ redis: { client, waitForReplicas: { timeout: 'soon' as never } } })).toThrow(
      expect.objectContaining({ argument: 'redis.waitForReplicas.timeout' }),
    )
    expect(() => createLocks({ redis: { client, waitForReplicas: { replica: 1 } as never } })).toThrow(
      expect.objectContaining({ argument: 'redis.waitForReplicas.replica' }),
    )
    expect(() => createLocks({ redis: { client, shardedPubSub: true } })).toThrow(
      expect.objectContaining({ argument: 'redis.shardedPubSub' }),
    )
    expect(() => createLocks({ redis: { client, other: 1 } as never })).toThrow(
      expect.objectContaining({ argument: 'redis.other' }),
    )
    expect(() => createLocks({ redis: { client: 'nope' } as never })).toThrow(
      expect.objectContaining({ argument: 'redis' }),
    )
    client.disconnect()
  })
})
