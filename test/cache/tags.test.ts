import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createCache, InvalidArgumentError, RedisUnavailableError, type Cache } from '../../src/index.js'
import { redisAvailable, startRedis } from '../support/redis.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { gate, until } from '../support/timing.js'

/** Every command the server ran, by name, less the INFO calls that read them. */
async function commandCounts(admin: Redis): Promise<Record<string, number>> {
  const counts: Record<string, number> = {}
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    counts[name!] = Number(calls)
  return counts
}

/** The commands run between two readings (INFO itself left out). */
function ran(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const diff: Record<string, number> = {}
  for (const [name, calls] of Object.entries(after)) {
    const more = calls - (before[name] ?? 0)
    if (more > 0 && name !== 'info') diff[name] = more
  }
  return diff
}

/**
 * Waits until `cache` has heard a tag message published after everything before it: the
 * per-key invalidations a deleteByTag published come first on the same subscriber
 * connection, so once the marker is in, so are they.
 */
async function heardEverything(admin: Redis, caches: Cache[], marker: string): Promise<void> {
  const before = caches.map((cache) => cache.stats()['tag-invalidated'])
  await admin.publish('sg:__tag_invalidations', `test|${marker}`)
  await until(
    () => caches.every((cache, i) => cache.stats()['tag-invalidated'] > before[i]!),
    'the marker to reach every cache',
  )
}

describe.skipIf(!redisAvailable)('tags', () => {
  const suite = useCacheSuite()

  it("deleteByTag drops every tagged entry from Redis and from every cache's L1; untagged ones stay", async () => {
    const [a, b] = [suite.cache(), suite.cache()]
    await Promise.all([a.ready(), b.ready()])
    let version = 1
    let loads = 0
    const loader = async () => (loads++, `v${version}`)
    await a.getOrLoad('p1', loader, { tags: ['product:1'] })
    await a.getOrLoad('list', async (ctx) => (ctx.tag('product:1', 'category:7'), loads++, `v${version}`))
    await a.getOrLoad('other', loader, { tags: ['product:2'] })
    await a.getOrLoad('plain', loader)
    for (const key of ['p1', 'list', 'other', 'plain']) expect(await b.getOrLoad(key, loader)).toBe('v1') // now in b's L1 too
    expect(loads).toBe(4)
    version = 2
    await a.deleteByTag('product:1')
    await heardEverything(suite.admin(), [b], 'after-1')
    for (const cache of [a, b]) {
      expect(await cache.getOrLoad('p1', loader)).toBe('v2')
      expect(await cache.getOrLoad('list', loader)).toBe('v2')
      expect(await cache.getOrLoad('other', loader)).toBe('v1')
      expect(await cache.getOrLoad('plain', loader)).toBe('v1')
    }
    expect(loads).toBe(6) // p1 and list reloaded once each, by a; b got a's values
    expect(b.stats()['tag-invalidated']).toBeGreaterThanOrEqual(2) // product:1, and the marker
    // A key stays listed under a tag until the tag is invalidated (or its list expires), even
    // when reloaded without it: at worst, one reload too many.
    version = 3
    await b.deleteByTag('category:7')
    // a drops its L1 copy when b's broadcast arrives, asynchronously (docs/tags.md): wait for it.
    await heardEverything(suite.admin(), [a], 'after-2')
    expect(await a.getOrLoad('list', loader)).toBe('v3')
  })

  it('a load in flight when deleteByTag runs cannot store its result under the tag; its callers still get it', async () => {
    const [a, b] = [suite.cache(), suite.cache({ l1: false })]
    await Promise.all([a.ready(), b.ready()])
    const started = gate()
    const finish = gate()
    const inFlight = a.getOrLoad('k', async () => (started.open(), await finish.promise, 'old'), { tags: ['t'] })
    await started.promise
    await b.deleteByTag('t')
    finish.open()
    expect(await inFlight).toBe('old')
    await until(() => a.stats().fenced === 1, 'the refused commit')
    expect(await suite.admin().exists('sg:{k:k}:v')).toBe(0) // no fresh copy
    expect(await suite.admin().hget('sg:{k:k}', 'd')).toBeNull() // no value (the hash holds the token counter)
    expect(await a.getOrLoad('k', async () => 'new', { tags: ['t'] })).toBe('new') // not the old one from L1
    expect(await b.getOrLoad('k', async () => 'unused')).toBe('new')
  })

  it('ctx.tag tags a load whose tags are known only once the data is read', async () => {
    const [a, b] = [suite.cache(), suite.cache({ l1: false })]
    const started = gate()
    const finish = gate()
    const inFlight = a.getOrLoad('k', async (ctx) => {
      started.open()
      await finish.promise
      ctx.tag('late')
      return 'old'
    })
    await started.promise
    await b.deleteByTag('late') // before the loader even named the tag
    finish.open()
    expect(await inFlight).toBe('old')
    expect(await b.getOrLoad('k', async () => 'new')).toBe('new')
  })

  it('the tag broadcast drops L1 entries no member list holds (a value loaded while Redis was out of reach)', async () => {
    const [a, b] = [suite.cache(), suite.cache()]
    await Promise.all([a.ready(), b.ready()])
    expect(await b.getOrLoad('k', async () => 'old', { tags: ['t'] })).toBe('old')
    await suite.admin().del('sg:tag:{t:t}:keys', 'sg:{k:k}:v', 'sg:{k:k}') // as if b had loaded it with Redis unreachable
    await a.deleteByTag('t')
    await heardEverything(suite.admin(), [b], 'after-broadcast')
    expect(await b.getOrLoad('k', async () => 'new')).toBe('new')
  })

  it('an invalidation that was cut short leaves its drain, and the next one finishes it', async () => {
    const a = suite.cache({ l1: false })
    await a.getOrLoad('k1', async () => 'old', { tags: ['t'] })
    await a.getOrLoad('k2', async () => 'old', { tags: ['t'] })
    const admin = suite.admin()
    await admin.rename('sg:tag:{t:t}:keys', 'sg:tag:{t:t}:drain') // step 1 done, the scan never ran
    await a.getOrLoad('k3', async () => 'old', { tags: ['t'] }) // a new member since
    await a.deleteByTag('t')
    for (const key of ['k1', 'k2', 'k3']) expect(await a.getOrLoad(key, async () => 'new')).toBe('new')
    expect(await admin.exists('sg:tag:{t:t}:keys', 'sg:tag:{t:t}:drain')).toBe(0)
  })

  it('set() with tags is dropped by deleteByTag like a load', async () => {
    const [a, b] = [suite.cache(), suite.cache()]
    await Promise.all([a.ready(), b.ready()])
    await a.set('s', 'old', { tags: ['t'] })
    expect(await b.getOrLoad('s', async () => 'unused')).toBe('old')
    await a.deleteByTags(['t', 'unused-tag'])
    await heardEverything(suite.admin(), [b], 'after-set')
    expect(await a.getOrLoad('s', async () => 'new')).toBe('new')
    expect(await b.getOrLoad('s', async () => 'unused')).toBe('new')
  })

  it('the member set lives as long as its longest-lived member, `at` for the longest a load may commit', async () => {
    const a = suite.cache({ lock: { lease: 1_000, maxHold: 5_000 } })
    await a.getOrLoad('short', async () => 1, { tags: ['t'], ttl: '10s' })
    await a.getOrLoad('long', async () => 1, { tags: ['t'], ttl: '100s', staleTtl: '100s' })
    await a.getOrLoad('short2', async () => 1, { tags: ['t'], ttl: '10s' })
    const admin = suite.admin()
    expect(await admin.smembers('sg:tag:{t:t}:keys')).toEqual(expect.arrayContaining(['short', 'long', 'short2']))
    const life = await admin.pttl('sg:tag:{t:t}:keys')
    expect(life).toBeGreaterThan(150_000) // the long one: up to 200 s, less ttlJitter
    expect(life).toBeLessThanOrEqual(201_100) // + redisTimeout (1 s): the commit, which sets the entry's expiry, comes after
    await a.deleteByTag('t')
    expect(await admin.exists('sg:tag:{t:t}:keys', 'sg:tag:{t:t}:drain')).toBe(0) // drained and emptied
    const atLife = await admin.pttl('sg:tag:{t:t}:at')
    expect(atLife).toBeGreaterThan(0)
    expect(atLife).toBeLessThanOrEqual(6_000) // lock.maxHold + lock.lease
  })

  it('a tag past maxKeysPerTag stores nothing more under it (uncacheable), and the callers still get their values', async () => {
    const a = suite.cache({ maxKeysPerTag: 2 })
    const reasons: string[] = []
    a.on('uncacheable', ({ reason }) => reasons.push(reason))
    for (const key of ['k1', 'k2', 'k3']) expect(await a.getOrLoad(key, async () => key, { tags: ['t'] })).toBe(key)
    expect(reasons).toHaveLength(1)
    expect(reasons[0]).toMatch(/maxKeysPerTag \(2\)/)
    expect(await suite.admin().scard('sg:tag:{t:t}:keys')).toBe(2)
    expect(await suite.admin().exists('sg:{k:k3}:v')).toBe(0)
    expect(await a.getOrLoad('k1', async () => 'again', { tags: ['t'] })).toBe('k1') // members stay cacheable
    await a.deleteByTag('t') // and an invalidation makes room
    // (A load in the same server millisecond as the invalidation is refused: it may have begun before it.)
    await until(
      async () =>
        (await a.getOrLoad('k3', async () => 'k3', { tags: ['t'] })) === 'k3' &&
        (await suite.admin().exists('sg:{k:k3}:v')) === 1,
      'k3 to be stored',
    )
    expect(await suite.admin().scard('sg:tag:{t:t}:keys')).toBe(1)
  })

  it('a hit costs one GET, tagged or not (zero commands from L1)', async () => {
    const writer = suite.cache({ l1: false })
    const reader = suite.cache({ l1: false })
    const withL1 = suite.cache()
    await Promise.all([writer.ready(), reader.ready(), withL1.ready()])
    await writer.getOrLoad('untagged', async () => 'u')
    await writer.getOrLoad('tagged', async () => 't', { tags: ['a', 'b', 'c'] })
    const admin = suite.admin()
    const noLoad = async () => {
      throw new Error('stored: no load')
    }
    const figures: Record<string, Record<string, number>> = {}
    for (const [name, read] of [
      ['untagged', () => reader.getOrLoad('untagged', noLoad)],
      ['tagged', () => reader.getOrLoad('tagged', noLoad)],
      ["tagged, with the call's tags", () => reader.getOrLoad('tagged', noLoad, { tags: ['a', 'b', 'c'] })],
    ] as const) {
      const before = await commandCounts(admin)
      await read()
      figures[name] = ran(before, await commandCounts(admin))
    }
    await withL1.getOrLoad('tagged', noLoad) // into L1
    const before = await commandCounts(admin)
    await withL1.getOrLoad('tagged', noLoad, { tags: ['a'] })
    figures['tagged, from L1'] = ran(before, await commandCounts(admin))
    console.log('hit commands:', JSON.stringify(figures))
    expect(figures).toEqual({
      untagged: { get: 1 },
      tagged: { get: 1 },
      "tagged, with the call's tags": { get: 1 },
      'tagged, from L1': {},
    })
  })

  it('bad tags are refused with InvalidArgumentError naming the argument', async () => {
    const a = suite.cache()
    const refused = async (attempt: () => Promise<unknown>) => {
      const error = await attempt().then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(InvalidArgumentError)
      return (error as InvalidArgumentError).argument
    }
    expect(await refused(() => a.getOrLoad('k', async () => 1, { tags: 'product:1' as unknown as string[] }))).toBe(
      'tags',
    )
    expect(await refused(() => a.getOrLoad('k', async () => 1, { tags: [''] }))).toBe('tags')
    expect(await refused(() => a.getOrLoad('k', async () => 1, { tags: ['x'.repeat(1025)] }))).toBe('tags')
    expect(await refused(() => a.getOrLoad('k', async () => 1, { tags: ['z\uD800'] }))).toBe('tags')
    expect(
      await refused(() => a.getOrLoad('k', async () => 1, { tags: Array.from({ length: 65 }, (_, i) => `t${i}`) })),
    ).toBe('tags')
    expect(await refused(() => a.deleteByTag(42 as unknown as string))).toBe('tags')
    expect(await refused(() => a.deleteByTags('t' as unknown as string[]))).toBe('tags')
    expect(await refused(() => a.set('k', 1, { tags: [null as unknown as string] }))).toBe('tags')
    expect(await refused(() => a.getOrLoad('k', async (ctx) => (ctx.tag(7 as unknown as string), 1)))).toBe('ctx.tag')
    expect(await refused(async () => createCache({ ttl: 1, maxKeysPerTag: 0 }))).toBe('maxKeysPerTag')
    expect(await refused(async () => createCache({ ttl: 1, tagClockSkew: -1 }))).toBe('tagClockSkew')
    // Duplicates count once; 64 distinct tags are fine.
    expect(
      await a.getOrLoad('k', async () => 1, { tags: [...Array.from({ length: 64 }, (_, i) => `t${i}`), 't0'] }),
    ).toBe(1)
  })

  it('tags with braces get their own hashed slot, apart from plain ones', async () => {
    const a = suite.cache()
    await a.getOrLoad('k', async () => 1, { tags: ['{x}'] })
    const keys = await suite.admin().keys('sg:tag:*')
    expect(keys).toHaveLength(1)
    expect(keys[0]).toMatch(/^sg:tag:\{th:[0-9a-f]{64}\}:keys$/)
    await a.deleteByTag('{x}')
    expect(await a.getOrLoad('k', async () => 2)).toBe(2)
  })

  it('without Redis, deleteByTag drops the tagged L1 entries', async () => {
    const cache = createCache({ ttl: '1m' })
    await cache.getOrLoad('k', async () => 'old', { tags: ['t'] })
    await cache.getOrLoad('j', async (ctx) => (ctx.tag('t'), 'old'))
    await cache.getOrLoad('u', async () => 'old', { tags: ['other'] })
    await cache.deleteByTag('t')
    expect(await cache.getOrLoad('k', async () => 'new')).toBe('new')
    expect(await cache.getOrLoad('j', async () => 'new')).toBe('new')
    expect(await cache.getOrLoad('u', async () => 'new')).toBe('old')
    await cache.close()
  })
})

describe.skipIf(!redisAvailable)('tags when Redis is down', () => {
  it('deleteByTag rejects with RedisUnavailableError, as delete() does', async () => {
    const server = await startRedis()
    try {
      const cache = createCache({
        redis: server.client({ maxRetriesPerRequest: 0 }),
        ttl: '1m',
        circuitBreaker: { threshold: 100 },
      })
      await cache.getOrLoad('k', async () => 'old', { tags: ['t'] })
      await server.kill()
      await expect(cache.deleteByTag('t')).rejects.toBeInstanceOf(RedisUnavailableError)
      await expect(cache.delete('k')).rejects.toBeInstanceOf(RedisUnavailableError)
      // This process's own L1 dropped it all the same.
      expect(await cache.getOrLoad('k', async () => 'new')).toBe('new')
      await cache.close()
    } finally {
      await server.stop()
    }
  })
})
