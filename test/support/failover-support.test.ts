import { afterAll, describe, expect, it } from 'vitest'
import { redisAvailable } from './redis.js'
import { redisCliBinary, startCluster, type RedisClusterHandle } from './redis-cluster.js'
import { startSentinel, type SentinelHandle } from './redis-sentinel.js'

const ci = process.env.CI === 'true'
if (redisAvailable && !redisCliBinary)
  console.warn('[failover-support] redis-cli not found: replicated-cluster tests are SKIPPED')

describe.skipIf(!redisAvailable || (!redisCliBinary && !ci))('test support: replicated cluster and sentinel', () => {
  let cluster: RedisClusterHandle | undefined
  let sentinel: SentinelHandle | undefined
  afterAll(async () => {
    await cluster?.stop()
    await sentinel?.stop()
  })

  it('starts 3 masters + 3 replicas, fails over gracefully and by SIGKILL, and heals after a restart', async () => {
    let t0 = performance.now()
    cluster = await startCluster({ masters: 3, replicas: 1 })
    console.log(`cluster of 6 ready in ${Math.round(performance.now() - t0)} ms`)
    const views = await cluster.topology()
    expect(views.filter((v) => v.role === 'master')).toHaveLength(3)
    expect(views.filter((v) => v.role === 'replica')).toHaveLength(3)

    const client = cluster.client()
    await client.set('{hot}:k', 'v1')
    const { replicas } = await cluster.ownerOf('{hot}:k')
    expect(replicas).toHaveLength(1)

    t0 = performance.now()
    await cluster.failover(replicas[0]!)
    console.log(`graceful failover in ${Math.round(performance.now() - t0)} ms`)
    expect((await cluster.ownerOf('{hot}:k')).master).toBe(replicas[0])
    expect(await client.get('{hot}:k')).toBe('v1')
    await cluster.waitHealthy()

    const owner = await cluster.ownerOf('{hot}:k')
    t0 = performance.now()
    await owner.master.kill()
    await cluster.waitForMaster(owner.replicas[0]!)
    console.log(`SIGKILL failover in ${Math.round(performance.now() - t0)} ms`)
    expect(await client.get('{hot}:k')).toBe('v1')
    await owner.master.restart()
    await cluster.waitHealthy()
    expect((await cluster.ownerOf('{hot}:k')).replicas).toEqual([owner.master])
  })

  it('starts a primary, a replica and 3 sentinels, and promotes the replica', async () => {
    let t0 = performance.now()
    sentinel = await startSentinel()
    console.log(`sentinel set-up ready in ${Math.round(performance.now() - t0)} ms`)
    const client = sentinel.client()
    await client.set('k', 'v1')
    const before = await sentinel.primary()
    t0 = performance.now()
    const after = await sentinel.failover()
    console.log(`SENTINEL FAILOVER in ${Math.round(performance.now() - t0)} ms`)
    expect(after).not.toBe(before)
    expect(await client.get('k')).toBe('v1')

    t0 = performance.now()
    await after.kill()
    const third = await sentinel.waitHealthy({ not: after })
    // With the old primary dead and the only replica promoted, the set-up has no replica.
    console.log(`SIGKILL promotion in ${Math.round(performance.now() - t0)} ms`)
    expect(third).toBe(before)
    await sentinel.rejoin(after)
    expect(await sentinel.primary()).toBe(before)
  })
})
