import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { startCluster, type RedisClusterHandle } from '../support/redis-cluster.js'
import { keySlot } from '../../src/redis/failing-clock.js'
import { sleep, until } from '../support/timing.js'

describe.skipIf(!redisAvailable)('Redis Cluster', () => {
  let cluster: RedisClusterHandle

  beforeAll(async () => {
    cluster = await startCluster({ masters: 3 })
  })
  afterAll(async () => {
    await cluster?.stop()
  })

  /** Calls of `command` on each node since the last RESETSTAT. */
  async function callsPerNode(command: string): Promise<number[]> {
    const infos = await Promise.all(cluster.nodes.map((node) => node.client().info('commandstats')))
    return infos.map((info) => Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0))
  }
  const callsOnNodes = async (command: string) => (await callsPerNode(command)).reduce((sum, calls) => sum + calls, 0)

  // The default ('auto') reads the server version: this is Redis ≥ 7 and a Cluster, so sharded.
  it.each([
    [false, false],
    [true, true],
    [undefined, true],
  ] as const)(
    'elects one loader across caches, wakes the waiters, and fences deletes, with keys spread over every master (shardedPubSub: %s, sharded: %s)',
    async (option, sharded) => {
      await Promise.all(cluster.nodes.map((node) => node.client().config('RESETSTAT')))
      const clients = [cluster.client(), cluster.client()]
      const namespace = option === undefined ? 'auto' : option ? 'sharded' : 'global'
      const shardedPubSub = sharded
      const [a, b] = clients.map((redis) =>
        createCache({ redis, ttl: '30s', namespace, ...(option === undefined ? {} : { shardedPubSub: option }) }),
      )
      const keys = Array.from({ length: 12 }, (_, i) => `product:${i}`)
      const loads = new Map<string, number>()
      // Each load ends only once both caches have queued on every key (one leads, the other waits),
      // so the waiters are really woken over pub/sub however slow the machine.
      const queued = () => a!.stats().leader + b!.stats().leader + a!.stats().wait + b!.stats().wait >= keys.length * 2
      let allQueued: Promise<void> | undefined
      const loader = (key: string) => async () => {
        loads.set(key, (loads.get(key) ?? 0) + 1)
        await (allQueued ??= until(queued, 'both caches to queue on every key'))
        return `value-${key}`
      }
      const results = await Promise.all(
        keys.flatMap((key) => [a!, b!, a!, b!].map((cache) => cache.getOrLoad(key, loader(key)))),
      )
      expect(results).toEqual(keys.flatMap((key) => Array(4).fill(`value-${key}`)))
      expect([...loads.values()]).toEqual(keys.map(() => 1))
      expect(a!.stats().wait + b!.stats().wait).toBeGreaterThan(0) // waiters were woken over pub/sub
      // Commits were announced with the chosen command (it runs inside the commit script).
      expect(await callsOnNodes(shardedPubSub ? 'spublish' : 'publish')).toBeGreaterThanOrEqual(keys.length)
      expect(await callsOnNodes(shardedPubSub ? 'publish' : 'spublish')).toBe(0)
      // Counted per node: with sharded pub/sub each master announced its own keys' commits.
      if (shardedPubSub) expect((await callsPerNode('spublish')).every((calls) => calls > 0)).toBe(true)

      // The entries really are spread over the masters (each key's names share one slot).
      const masters = await Promise.all(cluster.nodes.map((node) => node.client().dbsize()))
      expect(masters.filter((size) => size > 0).length).toBeGreaterThan(1)

      // The delete reaches b's L1 over the invalidation channel, which is asynchronous.
      await a!.delete('product:0')
      let seen = ''
      for (const deadline = Date.now() + 5_000; seen !== 'reloaded' && Date.now() < deadline; await sleep(10)) {
        seen = await b!.getOrLoad('product:0', async () => 'reloaded')
      }
      expect(seen).toBe('reloaded')
      await Promise.all([a!.close(), b!.close()])
      for (const client of clients) client.disconnect()
    },
  )

  it('the deletes of one tick go out as one script and message per slot, and a set() is announced by a script of no key', async () => {
    const clients = [cluster.client(), cluster.client()]
    const [a, b] = clients.map((redis) => createCache({ redis, ttl: '30s', namespace: 'batched' }))
    const keys = Array.from({ length: 12 }, (_, i) => `item:${i}`)
    for (const key of keys) expect(await a!.getOrLoad(key, async () => `old:${key}`)).toBe(`old:${key}`)
    for (const key of keys) expect(await b!.getOrLoad(key, async () => 'unused')).toBe(`old:${key}`) // in b's L1 now
    await Promise.all(cluster.nodes.map((node) => node.client().config('RESETSTAT')))
    await Promise.all(keys.map((key) => a!.delete(key)))
    const slots = new Set(keys.map((key) => keySlot(`batched:{k:${key}}`))).size
    expect(await callsOnNodes('publish')).toBe(slots) // one message per slot's batch, not per key
    for (const key of keys)
      await until(async () => (await b!.getOrLoad(key, async () => `new:${key}`)) === `new:${key}`, `b to drop ${key}`)

    await a!.set('item:0', 'set-by-a') // b holds 'new:item:0' in L1
    expect(await callsOnNodes('publish')).toBe(slots + 1)
    await until(async () => (await b!.getOrLoad('item:0', async () => 'unused')) === 'set-by-a', 'b to drop item:0')
    await Promise.all([a!.close(), b!.close()])
    for (const client of clients) client.disconnect()
  })
})
