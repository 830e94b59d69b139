import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { keySlot } from '../../src/redis/failing-clock.js'
import { redisAvailable } from '../support/redis.js'
import { startCluster, type RedisClusterHandle } from '../support/redis-cluster.js'

describe.skipIf(!redisAvailable)('getOrLoadMany on a Redis Cluster', () => {
  let cluster: RedisClusterHandle

  beforeAll(async () => {
    cluster = await startCluster({ masters: 3 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  const callsOnNodes = async (command: string) => {
    const infos = await Promise.all(cluster.nodes.map((node) => node.client().info('commandstats')))
    return infos
      .map((info) => Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0))
      .reduce((sum, calls) => sum + calls, 0)
  }

  it('keys over every master: one MGET and one get-or-lock-many call per slot, one batch-loader call, values right', async () => {
    const [a, b] = [cluster.client(), cluster.client()].map((redis) => createCache({ redis, ttl: '30s' }))
    const keys = Array.from({ length: 60 }, (_, i) => `item:${i}`)
    await a!.getOrLoadMany(
      keys.filter((_, i) => i % 3 !== 0),
      (got) => got.map((key) => `old:${key}`),
    )
    await b!.ready()
    await Promise.all(cluster.nodes.map((node) => node.client().config('RESETSTAT')))
    const batches: string[][] = []
    const results = await b!.getOrLoadMany(keys, (got) => {
      batches.push(got)
      return got.map((key) => `new:${key}`)
    })
    const missing = keys.filter((_, i) => i % 3 === 0)
    expect(batches).toEqual([missing])
    expect([...results.values()].map((r) => r.status === 'fulfilled' && r.value)).toEqual(
      keys.map((key, i) => (i % 3 === 0 ? `new:${key}` : `old:${key}`)),
    )
    const slots = (names: string[]) => new Set(names.map((name) => keySlot(name))).size
    expect(await callsOnNodes('mget')).toBe(slots(keys.map((key) => `sg:{k:${key}}:v`)))
    // Scripts: one get-or-lock-many per slot of the missing keys, then their commits.
    const scripts = (await callsOnNodes('evalsha')) + (await callsOnNodes('eval'))
    expect(scripts).toBe(slots(missing.map((key) => `sg:{k:${key}}`)) + missing.length)
    expect(cluster.nodes.length).toBe(3)
    await Promise.all([a!.close(), b!.close()])
  })
})
