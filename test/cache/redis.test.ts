import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
  createCache,
  RedisUnavailableError,
  RemoteLoaderError,
  SerializationError,
  type Cache,
  type CacheOptions,
} from '../../src/index.js'
import { redisAvailable, startRedis } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'
import { sleep } from '../support/timing.js'

/** Calls of each Redis command since the last reset (INFO commandstats). */
async function commandCalls(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats')
  const calls: Record<string, number> = {}
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[match[1]!] = Number(match[2])
  return calls
}

describe.skipIf(!redisAvailable)('with Redis', () => {
  const caches: Cache[] = []
  const suite = useRedisServer({
    flush: true,
    shared: true,
    cleanup: () => Promise.all(caches.splice(0).map((cache) => cache.close())),
  })

  function cache(options: Partial<CacheOptions> = {}): Cache {
    const created = createCache({ redis: suite.shared(), ttl: '30s', ...options })
    caches.push(created)
    return created
  }

  it('costs one plain GET per fresh hit without L1, and no command with an L1 hit', async () => {
    const remote = cache({ l1: false })
    await remote.getOrLoad('hit', async () => 'v')
    await suite.admin().config('RESETSTAT')
    for (let i = 0; i < 10; i++) expect(await remote.getOrLoad('hit', async () => 'other')).toBe('v')
    const calls = await commandCalls(suite.admin())
    // The fresh copy is read with GET: no script, so no TIME.
    expect(calls.get).toBe(10)
    expect(calls.evalsha ?? 0).toBe(0)
    expect(calls.time ?? 0).toBe(0)
    expect(calls.subscribe ?? 0).toBe(0)

    const local = cache()
    await local.getOrLoad('hit', async () => 'other')
    await suite.admin().config('RESETSTAT')
    for (let i = 0; i < 10; i++) expect(await local.getOrLoad('hit', async () => 'other')).toBe('v')
    const l1Calls = await commandCalls(suite.admin())
    // No read at all, not just no script: the L1 hit answers without Redis.
    expect(l1Calls.get ?? 0, JSON.stringify(l1Calls)).toBe(0)
    expect(l1Calls.mget ?? 0, JSON.stringify(l1Calls)).toBe(0)
    expect(l1Calls.evalsha ?? 0, JSON.stringify(l1Calls)).toBe(0)
  })

  it('fresh hits asked from separate macrotasks (as HTTP requests are) while a read is in flight go as one MGET', async () => {
    const remote = cache({ l1: false })
    const keys = Array.from({ length: 16 }, (_, i) => `m${i}`)
    for (const key of keys) await remote.getOrLoad(key, async () => `v-${key}`)
    await suite.admin().config('RESETSTAT')
    const first = remote.getOrLoad(keys[0]!, async () => 'other') // nothing in flight: a GET, at once
    // Each of the others from its own setImmediate, with the GET unanswered: a tick of their own each.
    const others = keys
      .slice(1)
      .map((key) => new Promise((resolve) => setImmediate(() => resolve(remote.getOrLoad(key, async () => 'other')))))
    expect(await Promise.all([first, ...others])).toEqual(keys.map((key) => `v-${key}`))
    const calls = await commandCalls(suite.admin())
    expect(calls.get, JSON.stringify(calls)).toBe(1)
    expect(calls.mget, JSON.stringify(calls)).toBe(1) // the 15 others together, not one GET per macrotask
    expect(calls.evalsha ?? 0, JSON.stringify(calls)).toBe(0)
  })

  it('ready(): createCache opens the subscriber and measures the clock in the background, so a first miss starts with a GET', async () => {
    const clients = async () => ((await suite.admin().client('LIST')) as string).trim().split('\n').length
    const before = await clients()
    const fresh = cache({ l1: false })
    await fresh.ready()
    expect(await clients()).toBe(before + 1) // the subscriber connection, before any wait needed it
    await suite.admin().config('RESETSTAT')
    expect(await fresh.getOrLoad('first', async () => 'v')).toBe('v')
    expect(await fresh.getOrLoad('first', async () => 'other')).toBe('v')
    const calls = await commandCalls(suite.admin())
    // Sent: GET (the miss reads the fresh copy first: the clock is known), get-or-lock, commit, GET (the hit).
    // commandstats also counts what scripts call: get-or-lock.lua's GET of the lock (is it our own,
    // from a retry whose reply was lost?), commit.lua's GET of the lock, one TIME per script.
    expect((calls.evalsha ?? 0) + (calls.eval ?? 0), JSON.stringify(calls)).toBe(2)
    expect(calls.get, JSON.stringify(calls)).toBe(2 + 2)
    expect(calls.time, JSON.stringify(calls)).toBe(2) // no TIME of its own: ready() measured the clock
  })

  it('ready(): never blocks or fails when Redis is down, and calls still answer', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, maxRetriesPerRequest: 1, retryStrategy: () => 50 })
    dead.on('error', () => {})
    const started = performance.now()
    const down = createCache({ redis: dead, ttl: '1m', redisTimeout: 200 })
    expect(performance.now() - started).toBeLessThan(500) // createCache itself waits for nothing
    await down.ready()
    expect(performance.now() - started).toBeLessThan(2_000)
    expect(await down.getOrLoad('k', async () => 'v')).toBe('v')
    await down.close()
    dead.disconnect()
  })

  it('delete() and set() reject when other processes could not be told: the broadcast is part of the write', async () => {
    // A user that may publish on the per-key channels but not on the invalidation channel.
    await suite.admin().acl('SETUSER', 'nobroadcast', 'on', '>pw', '~*', 'resetchannels', '&sg:{*', '+@all')
    const limited = new Redis({
      host: '127.0.0.1',
      port: Number(new URL(suite.server().url).port),
      username: 'nobroadcast',
      password: 'pw',
      maxRetriesPerRequest: 1,
    })
    limited.on('error', () => {})
    const c = createCache({ redis: limited, ttl: '1m', l1: false })
    try {
      expect(await c.getOrLoad('told', async () => 'v')).toBe('v')
      await expect(c.delete('told')).rejects.toThrow(RedisUnavailableError)
      await expect(c.set('told', 'w')).rejects.toThrow(RedisUnavailableError)
    } finally {
      await c.close()
      limited.disconnect()
      await suite.admin().acl('DELUSER', 'nobroadcast')
    }
  })

  it('hit-for-miss: callers run their own loader at once, flagged uncached', async () => {
    const remote = cache()
    const flags: boolean[] = []
    const loader =
      (value: string) =>
      async (ctx: { uncached: boolean; doNotCache(o: { share: boolean; passFor: number }): void }) => {
        flags.push(ctx.uncached)
        if (value === 'private') ctx.doNotCache({ share: false, passFor: 5_000 })
        return value
      }
    expect(await remote.getOrLoad('p', loader('private'))).toBe('private')
    expect(await remote.getOrLoad('p', loader('public'))).toBe('public')
    expect(await remote.getOrLoad('p', loader('again'))).toBe('again') // still not stored
    expect(flags).toEqual([false, true, true])
  })

  it('closing a cache removes every listener it added to the shared client', async () => {
    const shared = suite.server().client()
    const listeners = () => shared.eventNames().reduce((n, name) => n + shared.listenerCount(name), 0)
    const before = listeners()
    for (let i = 0; i < 20; i++) await createCache({ redis: shared, ttl: '1m' }).close()
    expect(listeners()).toBe(before)
    shared.disconnect()
  })

  it('recovers from malformed data at an entry key: a miss, overwritten, with an event', async () => {
    const c = cache({ l1: false })
    const corrupt: string[] = []
    c.on('corrupt', ({ key }) => corrupt.push(key))
    await suite
      .admin()
      .hset('sg:{k:bad-json}', 'd', '{not json', 'x', '99999999999999', 's', '99999999999999', 'e', '99999999999999')
    expect(await c.getOrLoad('bad-json', async () => 'repaired')).toBe('repaired')
    expect(await suite.admin().hget('sg:{k:bad-json}', 'd')).toBe('"repaired"')

    await suite.admin().set('sg:{k:foreign}', 'someone else wrote a string here')
    expect(await c.getOrLoad('foreign', async () => 'mine')).toBe('mine')
    expect(await suite.admin().hget('sg:{k:foreign}', 'd')).toBe('"mine"')
    expect(corrupt).toEqual(expect.arrayContaining(['bad-json', 'foreign']))
  })

  it('returns an unencodable value without caching it and says why', async () => {
    const c = cache()
    const events: unknown[] = []
    c.on('uncacheable', ({ error }) => events.push(error))
    const circular: Record<string, unknown> = { name: 'loop' }
    circular.self = circular
    const pattern = /a RegExp would become a plain object/
    expect(await c.getOrLoad('regexp', async () => pattern)).toBe(pattern)
    expect(await c.getOrLoad('circular', async () => circular)).toBe(circular)
    expect(await suite.admin().hexists('sg:{k:regexp}', 'd')).toBe(0)
    expect(await suite.admin().hexists('sg:{k:circular}', 'd')).toBe(0)
    expect(await suite.admin().exists('sg:{k:regexp}:lock')).toBe(0)
    expect(events).toHaveLength(2)
    expect(events.every((e) => e instanceof SerializationError)).toBe(true)
  })

  it('a loader error rejects waiters in other caches at once and releases the lock', async () => {
    const leader = cache()
    const waiter = cache()
    let started!: () => void
    let fail!: () => void
    const leaderStarted = new Promise<void>((resolve) => (started = resolve))
    const failNow = new Promise<void>((resolve) => (fail = resolve))
    await suite.admin().config('RESETSTAT')
    const led = leader.getOrLoad('boom', async () => {
      started()
      await failNow
      throw new TypeError('query failed')
    })
    await leaderStarted
    let waiterLoads = 0
    const waited = waiter.getOrLoad('boom', async () => (waiterLoads++, 'should not run'))
    // Fail only once the waiter is waiting: the leader's lookup, then the waiter's lookup
    // and its re-check after subscribing, are three script runs.
    const deadline = Date.now() + 10_000
    while (((await commandCalls(suite.admin())).evalsha ?? 0) < 3 && Date.now() < deadline) await sleep(5)
    fail()
    await expect(led).rejects.toThrow('query failed')
    const error = await waited.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RemoteLoaderError)
    expect((error as RemoteLoaderError).message).toMatch(/TypeError: query failed/)
    expect(waiterLoads).toBe(0)
    expect(await suite.admin().exists('sg:{k:boom}:lock')).toBe(0)
    expect(await suite.admin().hexists('sg:{k:boom}', 'd')).toBe(0)
    expect(await waiter.getOrLoad('boom', async () => 'retried')).toBe('retried')
  })

  it('keys containing braces get their own hashed slot and never collide', async () => {
    const c = cache({ l1: false })
    await c.getOrLoad('user:{1}', async () => 'one')
    await c.getOrLoad('user:{2}', async () => 'two')
    expect(await c.getOrLoad('user:{1}', async () => 'x')).toBe('one')
    expect(await c.getOrLoad('user:{2}', async () => 'x')).toBe('two')
    const keys = (await suite.admin().keys('sg:*')).sort()
    expect(keys).toHaveLength(4) // each: the entry hash and its fresh copy (:v)
    expect(keys.every((k) => /^sg:\{h:[0-9a-f]{64}\}(:v)?$/.test(k))).toBe(true)
  })

  it("delete reaches other processes' L1 and fences a load that was in flight", async () => {
    const a = cache()
    const b = cache()
    await a.getOrLoad('shared', async () => 'v1')
    expect(await b.getOrLoad('shared', async () => 'unused')).toBe('v1') // now in b's L1
    let finish!: () => void
    let started!: () => void
    const loaderStarted = new Promise<void>((resolve) => (started = resolve))
    const slow = a.getOrLoad(
      'other',
      () => new Promise<string>((resolve) => ((finish = () => resolve('before-delete')), started())),
    )
    await loaderStarted // a holds the lock and is loading
    await b.delete('other')
    finish()
    expect(await slow).toBe('before-delete')
    expect(a.stats().fenced).toBe(1)
    expect(await suite.admin().hexists('sg:{k:other}', 'd')).toBe(0)

    await a.delete('shared')
    const deadline = Date.now() + 5_000
    let seen = 'v1'
    while (seen === 'v1' && Date.now() < deadline) {
      seen = await b.getOrLoad('shared', async () => 'v2')
      if (seen === 'v1') await sleep(10)
    }
    expect(seen).toBe('v2')
  })

  it('answers from the loader when Redis is unreachable (fail open)', async () => {
    const dead = await startRedis()
    const client = dead.client({ maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 200 })
    client.on('error', () => {})
    const c = createCache({ redis: client, ttl: '30s', redisTimeout: 200 })
    await c.getOrLoad('warm', async () => 'ok')
    await dead.kill()
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => c.getOrLoad(`k${i}`, async () => `v${i}`)))
    expect(results).toEqual(['v0', 'v1', 'v2', 'v3', 'v4'])
    expect(c.stats()['redis-error']).toBeGreaterThan(0)
    await c.close()
    client.disconnect()
  })
})

describe.skipIf(!redisAvailable)('negative caching', () => {
  it('with negativeTtl, callers in other caches get a recent loader error at once instead of retrying', async () => {
    const server = await startRedis()
    const [ra, rb] = [server.client(), server.client()]
    // b asks well inside the negative window, even on a loaded machine.
    const a = createCache({ redis: ra, ttl: '30s', negativeTtl: 2_000 })
    const b = createCache({ redis: rb, ttl: '30s', negativeTtl: 2_000 })
    await expect(
      a.getOrLoad('neg', async () => {
        throw new Error('db down')
      }),
    ).rejects.toThrow('db down')
    let retries = 0
    const error = await b.getOrLoad('neg', async () => (retries++, 'fine')).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RemoteLoaderError)
    expect((error as Error).message).toMatch(/db down/)
    expect(retries).toBe(0)
    await sleep(2_100)
    expect(await b.getOrLoad('neg', async () => (retries++, 'fine'))).toBe('fine')
    expect(retries).toBe(1)
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
    await server.stop()
  })
})
