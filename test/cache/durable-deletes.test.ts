import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createCache, RedisUnavailableError, type Cache, type CacheEvents, type CacheOptions } from '../../src/index.js'
import { startBlackholeProxy, type BlackholeProxy } from '../support/blackhole-proxy.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { HOST, redisAvailable } from '../support/redis.js'
import { until } from '../support/timing.js'

function invalidArgument(argument: string) {
  return expect.objectContaining({ name: 'InvalidArgumentError', argument })
}

describe('durable deletes: options', () => {
  it('checks the cache option and the call option with typed errors', async () => {
    const bad: unknown[] = [
      { maxQueued: 0 },
      { maxQueued: 1.5 },
      { maxQueued: 2_000_000 },
      { default: 'yes' },
      { retryInterval: 'soon' },
      { other: 1 },
      'queue',
    ]
    for (const durableDeletes of bad)
      expect(() => createCache({ ttl: '1m', durableDeletes } as CacheOptions)).toThrow(
        expect.objectContaining({ name: 'InvalidArgumentError', argument: expect.stringMatching(/^durableDeletes/) }),
      )
    const cache = createCache({ ttl: '1m', durableDeletes: { default: 'queue', maxQueued: 5, retryInterval: '2s' } })
    await expect(cache.delete('k', { durable: true } as never)).rejects.toEqual(invalidArgument('durable'))
    await expect(cache.delete('k', { later: 1 } as never)).rejects.toEqual(invalidArgument('options.later'))
    expect(await cache.delete('k')).toBe('deleted') // in-process: nothing to queue
    await cache.close()
  })
})

describe.skipIf(!redisAvailable)('durable deletes through a partition', () => {
  const suite = useCacheSuite()
  let proxy: BlackholeProxy | undefined

  afterEach(async () => {
    await proxy?.close()
    proxy = undefined
  })

  /** A cache whose connections go through a proxy the test can cut. */
  async function partitionable(options: Partial<CacheOptions> = {}): Promise<{ cache: Cache; client: Redis }> {
    proxy = await startBlackholeProxy(suite.server().port)
    const client = new Redis({ host: HOST, port: proxy.port })
    client.on('error', () => {})
    const cache = createCache({ redis: client, ttl: '1m', redisTimeout: 200, ...options })
    await cache.ready()
    return { cache, client }
  }

  function record<E extends keyof CacheEvents>(cache: Cache, event: E): CacheEvents[E][] {
    const seen: CacheEvents[E][] = []
    cache.on(event, (payload) => seen.push(payload))
    return seen
  }

  it('by default a delete still rejects while Redis is unreachable (nothing queued)', async () => {
    const { cache, client } = await partitionable()
    await cache.getOrLoad('k', async () => 1)
    proxy!.blackhole()
    await expect(cache.delete('k')).rejects.toBeInstanceOf(RedisUnavailableError)
    expect(cache.stats()['delete-queued']).toBe(0)
    await cache.close()
    client.disconnect()
  })

  it("queues per key (coalesced), up to maxQueued; past it rejects and emits 'delete-dropped'; close() drops the rest", async () => {
    const { cache, client } = await partitionable({ durableDeletes: { maxQueued: 3, retryInterval: '1h' } })
    const queued = record(cache, 'delete-queued')
    const dropped = record(cache, 'delete-dropped')
    proxy!.blackhole()
    for (const key of ['a', 'b', 'c', 'a']) expect(await cache.delete(key, { durable: 'queue' })).toBe('queued')
    expect(queued.map((event) => event.queued)).toEqual([1, 2, 3, 3]) // 'a' again: one entry
    await expect(cache.delete('d', { durable: 'queue' })).rejects.toBeInstanceOf(RedisUnavailableError)
    expect(dropped).toEqual([{ key: 'd', reason: 'outbox-full' }])
    await expect(cache.delete('e')).rejects.toBeInstanceOf(RedisUnavailableError) // not durable: never queued
    await cache.close()
    expect(dropped.slice(1).map((event) => event.key)).toEqual(['b', 'c', 'a']) // in queue order
    expect(dropped.slice(1).every((event) => event.reason === 'closed')).toBe(true)
    client.disconnect()
  })

  it('replays in order once the partition heals: older values erased, a value written after the delete kept', async () => {
    const { cache, client } = await partitionable({ durableDeletes: { default: 'queue', retryInterval: '100ms' } })
    const other = suite.cache() // another cache, straight to Redis: not partitioned
    await other.ready()
    for (const key of ['k1', 'k2', 'k3']) await other.getOrLoad(key, async () => `${key}-old`)
    const replayed = record(cache, 'delete-replayed')
    const readyListeners = client.listenerCount('ready')
    proxy!.blackhole()
    for (const key of ['k1', 'k2', 'k3']) expect(await cache.delete(key)).toBe('queued')
    expect(client.listenerCount('ready')).toBe(readyListeners + 1) // the outbox's, once however many wait
    await other.set('k2', 'k2-newer') // written after the delete was asked for: must survive its replay
    proxy!.heal()
    await until(() => replayed.length === 3, 'the three deletes to be replayed', 10_000)
    const fresh = suite.cache()
    expect(await fresh.get('k1')).toBeUndefined()
    expect(await fresh.get('k2')).toBe('k2-newer')
    expect(await fresh.get('k3')).toBeUndefined()
    // (an attempt that got no answer is resent by ioredis after the reconnect: fenced too, so k2 stays)
    expect(replayed).toEqual([
      { key: 'k1', erased: true },
      { key: 'k2', erased: false },
      { key: 'k3', erased: true },
    ])
    await until(async () => (await other.get('k1')) === undefined, "the other cache's L1 to drop k1", 5_000)
    expect(cache.stats()['delete-dropped']).toBe(0)
    expect(client.listenerCount('ready')).toBe(readyListeners) // gone with the last queued delete
    await cache.close()
    client.disconnect()
  })

  it('the reconnect itself starts the replay (no retry timer due)', async () => {
    const { cache, client } = await partitionable({
      durableDeletes: { default: 'queue', retryInterval: '1h' },
      circuitBreaker: { threshold: 100 }, // kept closed: the reconnect's replay is not refused by it
    })
    const replayed = record(cache, 'delete-replayed')
    await cache.getOrLoad('a', async () => 'old')
    proxy!.blackhole()
    expect(await cache.delete('a')).toBe('queued')
    expect(await cache.delete('b')).toBe('queued')
    proxy!.heal()
    await until(() => replayed.length === 2, 'the reconnect to replay both', 10_000)
    expect(replayed.map((event) => event.key)).toEqual(['a', 'b'])
    expect(await suite.cache().get('a')).toBeUndefined()
    await cache.close()
    client.disconnect()
  })

  it('a namespace clear() that cannot reach Redis rejects, and clears nothing here either', async () => {
    const { cache, client } = await partitionable()
    const users = cache.namespace('users')
    await users.getOrLoad('k', async () => 'v')
    proxy!.blackhole()
    await expect(users.clear()).rejects.toBeInstanceOf(RedisUnavailableError)
    expect(cache.stats()['namespace-cleared']).toBe(0)
    expect(await users.getOrLoad('k', async () => 'reloaded')).toBe('v') // L1 copy, as before the call
    await cache.close()
    client.disconnect()
  })
})
