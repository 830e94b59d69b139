import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { commandsSinceReset } from '../support/command-stats.js'
import { HOST, redisAvailable } from '../support/redis.js'
import { gate, sleep, until } from '../support/timing.js'

function invalidArgument(argument: string) {
  return expect.objectContaining({ name: 'InvalidArgumentError', argument })
}

/** A loader that counts its runs in `counts[key]`. */
function counted(counts: Map<string, number>, key: string, value: unknown) {
  return async () => {
    counts.set(key, (counts.get(key) ?? 0) + 1)
    return value
  }
}

describe('namespaces in-process', () => {
  it('checks names, keys and tags with typed errors', async () => {
    const cache = createCache({ ttl: '1m' })
    for (const bad of ['', 'a\u0000b', 'x'.repeat(257), 42, 'z\uD800'])
      expect(() => cache.namespace(bad as string)).toThrow(invalidArgument('name'))
    const users = cache.namespace('users')
    await expect(users.getOrLoad('', async () => 1)).rejects.toEqual(invalidArgument('key'))
    await expect(users.get('')).rejects.toEqual(invalidArgument('key'))
    await expect(users.set('k', 1, { tags: [''] })).rejects.toEqual(invalidArgument('tags'))
    await expect(users.deleteByTag('')).rejects.toEqual(invalidArgument('tags'))
    expect(() => users.wrap(async () => 1, { key: () => 'k', ttl: -1 })).toThrow(invalidArgument('ttl'))
    await cache.close()
  })

  it('keys of two namespaces and of the cache itself are apart; clear() empties one, the cache-wide clear() every one', async () => {
    const cache = createCache({ ttl: '1m' })
    const loads = new Map<string, number>()
    const [users, orders] = [cache.namespace('users'), cache.namespace('orders')]
    expect(await users.getOrLoad('k', counted(loads, 'users', 'u'))).toBe('u')
    expect(await orders.getOrLoad('k', counted(loads, 'orders', 'o'))).toBe('o')
    expect(await cache.getOrLoad('k', counted(loads, 'root', 'r'))).toBe('r')
    await users.clear()
    expect(await users.get('k')).toBeUndefined()
    expect(await orders.get('k')).toBe('o')
    expect(await cache.namespace('orders').get('k')).toBe('o') // another view of the same name
    await cache.clear()
    expect(await orders.get('k')).toBeUndefined()
    expect(await cache.get('k')).toBe('r') // outside every namespace
    expect(Object.fromEntries(loads)).toEqual({ users: 1, orders: 1, root: 1 })
    await cache.close()
    const closed = expect.objectContaining({ name: 'CacheClosedError' })
    await expect(users.getOrLoad('k', async () => 1)).rejects.toEqual(closed)
    await expect(users.clear()).rejects.toEqual(closed)
    await expect(cache.clear()).rejects.toEqual(closed)
  })
})

describe.skipIf(!redisAvailable)('namespaces on Redis', () => {
  const suite = useCacheSuite()

  async function cache(options: Partial<CacheOptions> = {}): Promise<Cache> {
    const created = suite.cache(options)
    await created.ready()
    return created
  }

  it('getOrLoadMany, batcher, expire and expireByTag work on a view: its keys and tags, the batch loader sees them as given', async () => {
    const shared = await cache({ staleTtl: '1m' })
    const [users, orders] = [shared.namespace('users'), shared.namespace('orders')]
    const asked: string[][] = []
    const byMap = async (keys: string[]) => {
      asked.push(keys)
      return new Map(keys.map((key) => [key, `u:${key}`]))
    }
    const first = await users.getOrLoadMany(['a', 'b'], byMap, { tags: ['t'] })
    expect([...first].map(([key, result]) => [key, result.status === 'fulfilled' && result.value])).toEqual([
      ['a', 'u:a'],
      ['b', 'u:b'],
    ])
    const again = await users.getOrLoadMany(['a', 'b', 'c'], async (keys) => keys.map((key) => `u:${key}`))
    expect([...again.keys()]).toEqual(['a', 'b', 'c'])
    expect(asked).toEqual([['a', 'b']]) // a and b came from the cache; c from the array loader
    expect(await orders.get('a')).toBeUndefined() // another namespace's key of the same name
    const batch = users.batcher(async (keys) => keys.map((key) => `b:${key}`))
    expect(await Promise.all([batch.load('a'), batch.load('d')])).toEqual(['u:a', 'b:d'])

    await orders.set('a', 'o:a', { tags: ['t'] })
    expect(await users.expireByTag('t')).toBe(2) // a and b of users; orders' a keeps fresh
    expect(await users.expire('c')).toBe(true)
    expect(await users.expire('missing')).toBe(false)
    const loads = new Map<string, number>()
    expect(await users.getOrLoad('a', counted(loads, 'a', 'u:a2'))).toBe('u:a') // stale at once, reloaded behind
    await until(async () => (await users.get('a')) === 'u:a2', 'the stale a to be reloaded', 5_000)
    expect(loads.get('a')).toBe(1)
    const hit = await orders.getOrLoadResult('a', async () => 'never')
    expect(hit).toEqual(expect.objectContaining({ value: 'o:a', outcome: 'hit' }))
    await expect(users.getOrLoadMany(['ok', ''], byMap)).rejects.toEqual(invalidArgument('key'))
  })

  async function connections(): Promise<number> {
    return String(await suite.admin().call('CLIENT', 'LIST'))
      .trim()
      .split('\n').length
  }

  it('views open no connection: CLIENT LIST counts the same with 20 namespaces in use', async () => {
    const before = await connections()
    const cacheA = await cache()
    const opened = (await connections()) - before
    expect(opened).toBe(2) // the client passed in, and the cache's one subscriber connection
    const views = Array.from({ length: 20 }, (_, i) => cacheA.namespace(`ns${i}`))
    for (const view of views) {
      await view.getOrLoad('k', async () => view.name, { tags: ['t'] })
      await view.deleteByTag('t')
      await view.clear()
    }
    expect((await connections()) - before).toBe(2)
  })

  it('clear() is one command however much the namespace holds (no SCAN, no DEL)', async () => {
    const a = await cache()
    const users = a.namespace('users')
    const loads = new Map<string, number>()
    for (let i = 0; i < 200; i++) await users.getOrLoad(`u${i}`, counted(loads, `u${i}`, i))
    await suite.admin().config('RESETSTAT')
    await users.clear()
    // One script call (the first on this connection goes as EVAL); INFO counts the commands it runs too: 5, whatever the size.
    expect(await commandsSinceReset(suite.admin())).toEqual({ eval: 1, time: 1, type: 1, get: 1, set: 1, publish: 1 })
    for (let i = 0; i < 200; i++) await users.getOrLoad(`u${i}`, counted(loads, `u${i}`, i))
    expect([...loads.values()].every((n) => n === 2)).toBe(true)
  })

  it('another cache drops its L1 copies when the bump reaches it, and reloads each key once', async () => {
    const [a, b] = [await cache(), await cache()]
    const loads = new Map<string, number>()
    for (const c of [a, b])
      for (let i = 0; i < 10; i++) await c.namespace('users').getOrLoad(`u${i}`, counted(loads, `u${i}`, 'old'))
    expect([...loads.values()]).toEqual(Array(10).fill(1)) // b got a's values
    let told = 0
    b.on('namespace-cleared', (event) => {
      expect(event).toEqual({ namespace: 'users', from: 'remote' })
      told++
    })
    await a.namespace('users').clear()
    await until(() => told === 1, "b to hear of a's clear", 5_000)
    for (let i = 0; i < 10; i++) await b.namespace('users').getOrLoad(`u${i}`, counted(loads, `u${i}`, 'new'))
    for (let i = 0; i < 10; i++) expect(await a.namespace('users').get(`u${i}`)).toBe('new')
    expect([...loads.values()]).toEqual(Array(10).fill(2))
  })

  it('a hard clear never brings back a fail-safe value: not here, not in a process that held a copy', async () => {
    const [a, b] = [await cache({ ttl: 50, staleIfError: '1h' }), await cache({ ttl: 50, staleIfError: '1h' })]
    await a.namespace('users').getOrLoad('k', async () => 'before')
    expect(await b.namespace('users').getOrLoad('k', async () => 'b-loaded')).toBe('before') // b's L1 has it too
    await sleep(80) // past the ttl: only the fail-safe copy is left
    const failing = async (): Promise<string> => {
      throw new Error('database down')
    }
    // Without a clear, the failing loader is covered by the fail-safe copy (the test can fail):
    expect(await a.namespace('other').getOrLoad('k', async () => 'kept')).toBe('kept')
    await sleep(80)
    expect(await a.namespace('other').getOrLoad('k', failing)).toBe('kept')
    let told = false
    b.on('namespace-cleared', () => (told = true))
    await a.namespace('users').clear()
    await expect(a.namespace('users').getOrLoad('k', failing)).rejects.toThrow('database down')
    await until(() => told, 'b to hear of the clear', 5_000)
    await expect(b.namespace('users').getOrLoad('k', failing)).rejects.toThrow('database down')
    expect(await a.namespace('users').get('k')).toBeUndefined()
  })

  it('a load begun before clear() stores nothing a later call finds', async () => {
    const [a, b] = [await cache(), await cache()]
    const held = gate()
    const loads = new Map<string, number>()
    const slow = a.namespace('users').getOrLoad('k', async () => {
      await held.promise
      return 'before-clear'
    })
    await until(async () => (await suite.admin().keys('*:lock')).length === 1, 'the load to hold its lock', 5_000)
    await b.namespace('users').clear()
    held.open()
    expect(await slow).toBe('before-clear') // its own caller began before the clear
    await until(() => a.stats()['namespace-cleared'] === 1, 'a to hear of the clear', 5_000)
    expect(await b.namespace('users').getOrLoad('k', counted(loads, 'k', 'after'))).toBe('after')
    expect(await a.namespace('users').getOrLoad('k', counted(loads, 'k', 'a-after'))).toBe('after')
    expect(loads.get('k')).toBe(1)
  })

  it('the rest of the API through a view: set, get, has, delete, getOrLoadResult, wrap', async () => {
    const [a, b] = [await cache(), await cache()]
    await a.namespace('users').set('s', { id: 1 })
    expect(await b.namespace('users').get('s')).toEqual({ id: 1 })
    expect(await b.namespace('users').has('s')).toBe(true)
    expect(await b.get('s')).toBeUndefined() // not the cache's own key
    expect(await a.namespace('users').delete('s', { durable: 'queue' })).toBe('deleted')
    await until(async () => !(await b.namespace('users').has('s')), "b's L1 to drop the deleted key", 5_000)
    expect(await a.namespace('users').getOrLoadResult('r', async () => 1)).toEqual({ value: 1, outcome: 'loaded' })
    expect(await b.namespace('users').getOrLoadResult('r', async () => 2)).toEqual({ value: 1, outcome: 'hit' })
    let runs = 0
    const wrapped = (c: Cache) =>
      c.namespace('users').wrap(
        async (id: string) => {
          runs++
          return `user ${id}`
        },
        { key: (id) => `w:${id}` },
      )
    expect(await wrapped(a)('7')).toBe('user 7')
    expect(await wrapped(b)('7')).toBe('user 7')
    expect(await b.namespace('orders').get('w:7')).toBeUndefined()
    expect(runs).toBe(1)
  })

  it('while its subscriber connection is down, a cache reads the generation on every call (a clear then goes unheard)', async () => {
    const a = await cache()
    // b's subscriber (a duplicate of its client) reconnects only after 2 s: the steps below run while it is down.
    const client = new Redis({ host: HOST, port: suite.server().port, retryStrategy: () => 2_000 })
    const b = createCache({ redis: client, ttl: '30s' })
    await b.ready()
    await b.namespace('users').getOrLoad('k', async () => 'old')
    await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await until(() => b.stats()['redis-error'] > 0, 'b to see its subscriber connection lost', 5_000)
    expect(await b.namespace('users').getOrLoad('k', async () => 'unexpected')).toBe('old') // read: nothing cleared yet
    await a.namespace('users').clear() // published while b cannot hear it
    expect(await b.namespace('users').getOrLoad('k', async () => 'new')).toBe('new')
    await b.close()
    client.disconnect()
  })

  it('tags are per namespace: deleteByTag in one leaves the same tag of another', async () => {
    const a = await cache()
    const loads = new Map<string, number>()
    for (const name of ['users', 'orders'])
      await a.namespace(name).getOrLoad('k', counted(loads, name, name), { tags: ['t'] })
    await a.namespace('users').deleteByTag('t')
    for (const name of ['users', 'orders'])
      await a.namespace(name).getOrLoad('k', counted(loads, name, name), { tags: ['t'] })
    expect(Object.fromEntries(loads)).toEqual({ users: 2, orders: 1 })
  })

  it("the cache's clear() empties every namespace in every process, and leaves the cache's own keys", async () => {
    const [a, b] = [await cache(), await cache()]
    const loads = new Map<string, number>()
    await a.getOrLoad('plain', counted(loads, 'plain', 1))
    for (const name of ['users', 'orders']) await a.namespace(name).getOrLoad('k', counted(loads, name, 1))
    for (const name of ['users', 'orders']) expect(await b.namespace(name).get('k')).toBe(1)
    await a.clear()
    await until(() => b.stats()['namespace-cleared'] === 1, 'b to hear of the clear', 5_000)
    for (const name of ['users', 'orders']) expect(await b.namespace(name).get('k')).toBeUndefined()
    expect(await b.get('plain')).toBe(1)
  })

  it('a cache whose subscriber connection dropped reads the generation again before serving its L1 copies', async () => {
    const [a, b] = [await cache(), await cache()]
    await b.namespace('users').getOrLoad('k', async () => 'old')
    // Cut b's subscriber off from the bump: pause its connection's delivery by killing every pub/sub client, then clear.
    await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await a.namespace('users').clear()
    const channel = 'sg:__generations'
    await until(
      async () => ((await suite.admin().pubsub('NUMSUB', channel)) as [string, number])[1] === 2,
      'both subscribers to be back',
      10_000,
    )
    expect(await b.namespace('users').getOrLoad('k', async () => 'new')).toBe('new')
  })
})
