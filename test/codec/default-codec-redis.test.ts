/**
 * The default codec through a shared Redis: a row with a Date (and BigInt, Map, Set) loaded
 * by one cache is what another cache reads, without loading; plain JSON is stored as
 * JSON.stringify writes it; a refused value warns once per cache and reason; corrupt tagged
 * data is a miss with a `corrupt` event, then repaired by one load.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Redis } from 'ioredis'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { UNCACHEABLE_WARNING_CODE } from '../../src/refusal-warnings.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'

describe.skipIf(!redisAvailable)('the default codec on Redis', () => {
  let server: RedisServer
  let admin: Redis
  const caches: Cache[] = []
  let prefix = 0
  beforeAll(async () => {
    server = await startRedis()
    admin = server.client()
  })
  afterAll(async () => {
    await Promise.all(caches.map((c) => c.close()))
    await server?.stop()
  })
  /** A cache on its own connection; `namespace` shared by the caches of one test. */
  function cache(namespace: string, options: Partial<CacheOptions> = {}): Cache {
    const c = createCache({ redis: server.client(), namespace, ttl: '1m', l1: false, ...options })
    caches.push(c)
    return c
  }
  const fresh = () => `codec${++prefix}`

  it('a row with a Date, a BigInt, a Map and a Set: loaded once, read back by another cache as the same types', async () => {
    const ns = fresh()
    const [a, b] = [cache(ns), cache(ns)]
    const row = {
      id: 7,
      updatedAt: new Date('2026-01-02T03:04:05.678Z'),
      balance: 12345678901234567890n,
      roles: new Set(['admin']),
      limits: new Map([['daily', 3]]),
      history: [1, undefined, NaN],
    }
    let loads = 0
    const load = async () => (loads++, row)
    expect(await a.getOrLoad('row', load)).toBe(row)
    const read = (await b.getOrLoad('row', load)) as typeof row
    expect(loads).toBe(1)
    expect(read.updatedAt).toBeInstanceOf(Date)
    expect(read).toEqual(row)
    expect(a.stats().uncacheable).toBe(0)
    expect((await admin.hget(`${ns}:{k:row}`, 'd'))?.startsWith('~{"id":7,"updatedAt":{"~d":1767323045678}')).toBe(true)
  })

  it('plain JSON is stored byte for byte as JSON.stringify writes it', async () => {
    const ns = fresh()
    const value = { a: [1, 'two', null, true], '~b': { c: 1.5 } }
    await cache(ns).set('plain', value)
    expect(await admin.hget(`${ns}:{k:plain}`, 'd')).toBe(JSON.stringify(value))
    expect(await cache(ns).getOrLoad('plain', async () => 'unused')).toEqual(value)
  })

  it('a refused value: returned, not stored, an uncacheable event each time, one process warning per cache and reason', async () => {
    const warnings: Error[] = []
    const onWarning = (warning: Error) => {
      if ((warning as Error & { code?: string }).code === UNCACHEABLE_WARNING_CODE) warnings.push(warning)
    }
    process.on('warning', onWarning)
    try {
      const ns = fresh()
      const [a, b] = [cache(ns), cache(ns)]
      class Point {
        constructor(readonly x: number) {}
      }
      const events: string[] = []
      a.on('uncacheable', ({ reason }) => events.push(reason))
      for (const key of ['r1', 'r2', 'r3']) {
        const value = { pattern: /x/ }
        expect(await a.getOrLoad(key, async () => value)).toBe(value)
      }
      await a.getOrLoad('p1', async () => ({ at: new Point(1) }))
      await a.getOrLoad('p2', async () => ({ at: new Point(2) }))
      await b.getOrLoad('r4', async () => ({ pattern: /y/ }))
      // process.emitWarning reports on the next tick.
      await new Promise((resolve) => setImmediate(resolve))
      expect(events).toHaveLength(5)
      expect(events[0]).toMatch(/a RegExp would become a plain object \(at "pattern"\)/)
      expect(a.stats().uncacheable).toBe(5)
      for (const key of ['r1', 'p1', 'r4']) expect(await admin.hexists(`${ns}:{k:${key}}`, 'd'), key).toBe(0)
      expect(warnings.map((w) => w.message)).toEqual([
        expect.stringContaining('a RegExp would become a plain object (first for key "r1")'),
        expect.stringContaining('a Point would become a plain object (first for key "p1")'),
        expect.stringContaining('a RegExp would become a plain object (first for key "r4")'),
      ])
      expect(warnings[0]?.name).toBe('StampedeGuardWarning')
    } finally {
      process.off('warning', onWarning)
    }
  })

  it.each([
    ['an unknown tag', '~{"at":{"~z":1}}'],
    ['a Date tag holding text', '~{"at":{"~d":"yesterday"}}'],
    ['truncated tagged JSON', '~{"at":{"~d":17'],
  ])('corrupt data in Redis (%s): a miss with a corrupt event, then one load repairs it', async (_, planted) => {
    const ns = fresh()
    const a = cache(ns)
    const corrupt: string[] = []
    a.on('corrupt', ({ key }) => corrupt.push(key))
    await a.set('bad', { at: new Date(1) })
    // Both copies: the hash's d field, and the fresh copy's data after its six header fields (src/redis/record.ts).
    await admin.hset(`${ns}:{k:bad}`, 'd', planted)
    const record = await admin.get(`${ns}:{k:bad}:v`)
    expect(record).not.toBeNull()
    await admin.set(`${ns}:{k:bad}:v`, `${record!.split('|').slice(0, 6).join('|')}|${planted}`, 'KEEPTTL')
    let loads = 0
    const load = async () => (loads++, { at: new Date(2) })
    expect(await a.getOrLoad('bad', load)).toEqual({ at: new Date(2) })
    expect(await a.getOrLoad('bad', load)).toEqual({ at: new Date(2) })
    expect(loads).toBe(1)
    expect(corrupt).toContain('bad')
  })
})
