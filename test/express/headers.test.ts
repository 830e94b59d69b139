/**
 * Rule 12 / acceptance 4: Age on every response served from the cache, and X-Cache
 * reporting HIT, MISS, STALE and BYPASS (only when the route turns it on).
 */
import { describe, expect, it } from 'vitest'
import type { CacheRouteOptions } from '../../src/express/index.js'
import { redisAvailable } from '../support/redis.js'
import { sleep, until, useRouteHarness, type Served } from './helpers.js'

describe.skipIf(!redisAvailable)('Age and X-Cache', () => {
  // No X-Cache unless a test asks for it.
  const { route, runs } = useRouteHarness({ method: 'get', defaults: { ttl: '30s' } })

  function app(options: Partial<CacheRouteOptions> = {}): Promise<Served> {
    return route((req, res) => {
      if (req.query.private) res.set('Cache-Control', 'private')
      res.set('Age', '500').send(`run ${runs()}`) // an upstream Age is part of the response's age
    }, options)
  }

  it("Age is the response's current age: its Age when stored plus the seconds since (RFC 9111 §4.2.3)", async () => {
    const server = await app({ xCacheHeader: true })
    const miss = await server.get('/r')
    expect(miss.headers['x-cache']).toBe('MISS')
    expect(miss.headers.age).toBe('500') // the handler's own, kept
    await sleep(1100)
    const hit = await server.get('/r')
    expect(hit.headers['x-cache']).toBe('HIT')
    expect(Number(hit.headers.age)).toBeGreaterThanOrEqual(501)
    expect(Number(hit.headers.age)).toBeLessThan(505)
    // The stored Date is the generation time, so Date + Age agree for downstream caches.
    expect(hit.headers.date).toBe(miss.headers.date)
  })

  it('X-Cache says MISS, HIT, STALE and BYPASS', async () => {
    // ttl 1 s: the HIT request lands well inside it, even on a loaded machine.
    const server = await app({ xCacheHeader: true, ttl: 1_000, staleTtl: '30s' })
    const seen = [(await server.get('/r')).headers['x-cache'], (await server.get('/r')).headers['x-cache']]
    await sleep(1_100)
    seen.push((await server.get('/r')).headers['x-cache'])
    seen.push((await server.get('/r').set('Cookie', 'a=b')).headers['x-cache'])
    seen.push((await server.get('/r?private=1')).headers['x-cache'])
    expect(seen).toEqual(['MISS', 'HIT', 'STALE', 'BYPASS', 'BYPASS'])
    await until(() => runs() === 4, 'the background refresh') // run 1, refresh, Cookie, private
  })

  it('X-Cache says BYPASS, without Age, for hit-for-miss requests whose responses are not stored', async () => {
    const server = await route(
      (_req, res) => {
        if (runs() === 1) res.set('Cache-Control', 'private') // then storable, but the URL is hit-for-miss for a while
        res.send(`run ${runs()}`)
      },
      { xCacheHeader: true },
    )
    for (let i = 1; i <= 3; i++) {
      const res = await server.get('/r')
      expect(res.text).toBe(`run ${i}`)
      expect(res.headers['x-cache']).toBe('BYPASS')
      expect(res.headers.age).toBeUndefined()
    }
  })

  it('X-Cache is off by default: it tells attackers which inputs are keyed', async () => {
    const server = await app()
    for (let i = 0; i < 2; i++) expect((await server.get('/r')).headers['x-cache']).toBeUndefined()
    expect((await server.get('/r').set('Cookie', 'a=b')).headers['x-cache']).toBeUndefined()
  })
})
