import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { commandsSinceReset } from '../support/command-stats.js'
import { freePort } from '../support/managed-process.js'
import { HOST, redisAvailable } from '../support/redis.js'
import { gate, sleep, until } from '../support/timing.js'

/** A loader that counts its runs in `counts[key]`. */
function counted(counts: Map<string, number>, key: string, value: unknown) {
  return async () => {
    counts.set(key, (counts.get(key) ?? 0) + 1)
    return value
  }
}

const failing = async (): Promise<string> => {
  throw new Error('database down')
}

describe('clearable in-process', () => {
  it('refuses a clearable that is not a boolean', () => {
    expect(() => createCache({ ttl: '1m', clearable: 'yes' as unknown as boolean })).toThrow(
      expect.objectContaining({ name: 'InvalidArgumentError', argument: 'clearable' }),
    )
  })

  it('bad keys and tags are refused with the same typed errors; maxKeyLength counts the prefix', async () => {
    const cache = createCache({ ttl: '1m', clearable: true, maxKeyLength: 20 })
    const invalid = (argument: string) => expect.objectContaining({ name: 'InvalidArgumentError', argument })
    await expect(cache.getOrLoad('', async () => 1)).rejects.toEqual(invalid('key'))
    await expect(cache.get(42 as unknown as string)).rejects.toEqual(invalid('key'))
    await expect(cache.set('k', 1, { tags: [''] })).rejects.toEqual(invalid('tags'))
    await expect(cache.deleteByTag('')).rejects.toEqual(invalid('tags'))
    await expect(cache.getOrLoad('x'.repeat(14), async () => 1)).rejects.toEqual(invalid('key')) // 7 + 14 > 20
    expect(await cache.getOrLoad('x'.repeat(13), async () => 1)).toBe(1)
    await cache.close()
  })

  it("clear() empties the cache's own keys and every namespace; tags work after it; without the option own keys stay", async () => {
    for (const clearable of [true, false]) {
      const cache = createCache({ ttl: '1m', staleTtl: '1h', clearable })
      const loads = new Map<string, number>()
      await cache.getOrLoad('k', counted(loads, 'k', 1), { tags: ['t'] })
      await cache.namespace('users').getOrLoad('k', counted(loads, 'users', 1))
      await cache.clear()
      expect(await cache.get('k')).toBe(clearable ? undefined : 1)
      expect(await cache.namespace('users').get('k')).toBeUndefined()
      await cache.getOrLoad('k', counted(loads, 'k', 2), { tags: ['t'] })
      await cache.deleteByTag('t') // the tag of the new generation
      expect(await cache.has('k')).toBe(false)
      expect(Object.fromEntries(loads)).toEqual({ k: clearable ? 2 : 1, users: 1 })
      await cache.close()
    }
  })
})

describe('clearable with Redis down', () => {
  it('still answers (the generation cannot be read: the last one known stands); clear() rejects typed', async () => {
    const client = new Redis({ host: HOST, port: await freePort(), maxRetriesPerRequest: 0, retryStrategy: () => 50 })
    client.on('error', () => {})
    const cache = createCache({ redis: client, ttl: '1m', clearable: true, redisTimeout: 200 })
    const loads = new Map<string, number>()
    const answers = await Promise.all(Array.from({ length: 20 }, () => cache.getOrLoad('k', counted(loads, 'k', 'v'))))
    expect(answers).toEqual(Array(20).fill('v'))
    expect(loads.get('k')).toBe(1) // one load in this process for the 20 concurrent callers
    expect(await cache.getOrLoad('k', counted(loads, 'k', 'again'))).toBe('v') // its L1 copy
    await expect(cache.clear()).rejects.toEqual(expect.objectContaining({ name: 'RedisUnavailableError' }))
    await cache.close()
    client.disconnect()
  })
})

describe.skipIf(!redisAvailable)('clearable on Redis', () => {
  const suite = useCacheSuite()

  async function cache(options: Partial<CacheOptions> = {}): Promise<Cache> {
    const created = suite.cache({ clearable: true, ...options })
    await created.ready()
    return created
  }

  async function entryNames(): Promise<string[]> {
    return (await suite.admin().keys('sg:{k*')).sort()
  }

  it('without the option the key names are as before: sg:{k:<key>}, and the generations never touched', async () => {
    const plain = await cache({ clearable: false })
    await plain.getOrLoad('plain', async () => 1, { tags: ['t'] })
    // It never touched the generations: not subscribed to their bumps, no generation key.
    expect(await suite.admin().pubsub('NUMSUB', 'sg:__generations')).toEqual(['sg:__generations', 0])
    expect(await suite.admin().keys('sg:__generation*')).toEqual([])
    expect(await entryNames()).toEqual(['sg:{k:plain}', 'sg:{k:plain}:v'])
    expect(await suite.admin().keys('sg:tag:*')).toEqual(expect.arrayContaining([expect.stringContaining('{t:t}')]))
  })

  it('with it, the cache is subscribed to the bumps from the start', async () => {
    await cache()
    expect(await suite.admin().pubsub('NUMSUB', 'sg:__generations')).toEqual(['sg:__generations', 1])
  })

  it('with it, keys and tags carry the cache-wide generation, which clear() raises with one script', async () => {
    const a = await cache()
    const loads = new Map<string, number>()
    for (let i = 0; i < 50; i++) await a.getOrLoad(`k${i}`, counted(loads, `k${i}`, 'old'), { tags: ['t'] })
    const names = await entryNames()
    expect(names).toHaveLength(100) // the entry and its value, per key
    expect(names.every((name) => name.startsWith('sg:{k:\u0000ns\u0000\u00000\u0000'))).toBe(true)
    const tags = await suite.admin().keys('sg:tag:*')
    expect(tags.length > 0 && tags.every((tag) => tag.includes('\u0000ns\u0000\u00000\u0000t'))).toBe(true)
    await suite.admin().config('RESETSTAT')
    await a.clear()
    expect(await commandsSinceReset(suite.admin())).toEqual({ eval: 1, time: 1, type: 1, get: 1, set: 1, publish: 1 })
    for (let i = 0; i < 50; i++) await a.getOrLoad(`k${i}`, counted(loads, `k${i}`, 'new'), { tags: ['t'] })
    expect([...loads.values()].every((n) => n === 2)).toBe(true)
    expect(await a.get('k0')).toBe('new')
    await a.deleteByTag('t') // the new generation's tag reaches the new entries
    expect(await a.has('k0')).toBe(false)
  })

  it('another cache drops its L1 copies on the bump and reloads each key once; no stale copy after the clear', async () => {
    const [a, b] = [await cache({ staleTtl: '1h' }), await cache({ staleTtl: '1h' })]
    const loads = new Map<string, number>()
    for (const c of [a, b]) for (let i = 0; i < 10; i++) await c.getOrLoad(`u${i}`, counted(loads, `u${i}`, 'old'))
    expect([...loads.values()]).toEqual(Array(10).fill(1))
    const told: unknown[] = []
    b.on('namespace-cleared', (event) => told.push(event))
    await a.clear()
    await until(() => told.length === 1, "b to hear of a's clear", 5_000)
    expect(told).toEqual([{ namespace: undefined, from: 'remote' }])
    for (let i = 0; i < 10; i++) expect(await b.getOrLoad(`u${i}`, counted(loads, `u${i}`, 'new'))).toBe('new')
    for (let i = 0; i < 10; i++) expect(await a.getOrLoad(`u${i}`, counted(loads, `u${i}`, 'a-new'))).toBe('new')
    expect([...loads.values()]).toEqual(Array(10).fill(2))
  })

  it('a hard clear never brings back a fail-safe value of an own key', async () => {
    const [a, b] = [await cache({ ttl: 50, staleIfError: '1h' }), await cache({ ttl: 50, staleIfError: '1h' })]
    await a.getOrLoad('k', async () => 'before')
    await a.getOrLoad('control', async () => 'kept')
    expect(await b.getOrLoad('k', async () => 'b-loaded')).toBe('before')
    await sleep(80) // past the ttl: only the fail-safe copies are left
    expect(await a.getOrLoad('control', failing)).toBe('kept') // uncleared: the fail-safe copy answers (the test can fail)
    await a.clear()
    await expect(a.getOrLoad('k', failing)).rejects.toThrow('database down')
    await until(() => b.stats()['namespace-cleared'] === 1, 'b to hear of the clear', 5_000)
    await expect(b.getOrLoad('k', failing)).rejects.toThrow('database down')
  })

  it('a load begun before clear() stores nothing a later call finds', async () => {
    const [a, b] = [await cache(), await cache()]
    const held = gate()
    const loads = new Map<string, number>()
    const slow = a.getOrLoad('k', async () => {
      await held.promise
      return 'before-clear'
    })
    await until(async () => (await suite.admin().keys('*:lock')).length === 1, 'the load to hold its lock', 5_000)
    await b.clear()
    held.open()
    expect(await slow).toBe('before-clear')
    await until(() => a.stats()['namespace-cleared'] === 1, 'a to hear of the clear', 5_000)
    expect(await b.getOrLoad('k', counted(loads, 'k', 'after'))).toBe('after')
    expect(await a.getOrLoad('k', counted(loads, 'k', 'a-after'))).toBe('after')
    expect(loads.get('k')).toBe(1)
  })

  it('the whole API goes through the generation: set, has, delete, getOrLoadMany, batcher, expire, expireByTag, wrap', async () => {
    const [a, b] = [await cache({ staleTtl: '1m' }), await cache({ staleTtl: '1m' })]
    await a.set('s', 1, { tags: ['t'] })
    const many = await a.getOrLoadMany(['m1', 'm2'], async (keys) => new Map(keys.map((key) => [key, key])), {
      tags: ['t'],
    })
    expect([...many.keys()]).toEqual(['m1', 'm2']) // as given, not as stored
    expect(await a.batcher(async (keys) => keys.map(() => 'never')).load('m1')).toBe('m1')
    let runs = 0
    const wrapped = a.wrap(async (id: string) => `w${id}${++runs}`, { key: (id) => `w:${id}` })
    expect(await wrapped('1')).toBe('w11')
    expect(await b.get('s')).toBe(1)
    expect(await b.expire('m1')).toBe(true)
    expect(await b.expireByTag('t')).toBe(2) // s and m2 (m1 already stale)
    expect(await b.delete('s')).toBe('deleted')
    await until(async () => !(await a.has('s')), "a's L1 to drop the deleted key", 5_000)
    await a.clear()
    await until(() => b.stats()['namespace-cleared'] === 1, 'b to hear of the clear', 5_000)
    for (const c of [a, b]) {
      expect(await c.get('m2')).toBeUndefined()
      expect(await c.has('m1')).toBe(false)
    }
    expect(await wrapped('1')).toBe('w12')
    const again = await b.getOrLoadMany(['m1'], async (keys) => keys.map(() => 'reloaded'))
    expect(again.get('m1')).toEqual({ status: 'fulfilled', value: 'reloaded' })
  })

  it('events name own keys in their stored form', async () => {
    const a = await cache()
    const keys: string[] = []
    a.on('miss', (event) => keys.push(event.key))
    await a.getOrLoad('k', async () => 1)
    expect(keys).toEqual(['\u0000ns\u0000\u00000\u0000k'])
  })

  it('after its subscriber connection dropped, a cache reads the generation again before serving own keys', async () => {
    const a = await cache()
    const client = new Redis({ host: HOST, port: suite.server().port, retryStrategy: () => 2_000 })
    const b = createCache({ redis: client, ttl: '30s', clearable: true })
    await b.ready()
    await b.getOrLoad('k', async () => 'old')
    await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await until(() => b.stats()['redis-error'] > 0, 'b to see its subscriber connection lost', 5_000)
    expect(await b.getOrLoad('k', async () => 'unexpected')).toBe('old')
    await a.clear() // published while b cannot hear it
    expect(await b.getOrLoad('k', async () => 'new')).toBe('new')
    await b.close()
    client.disconnect()
  })
})
