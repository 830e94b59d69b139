/**
 * RFC 9111 invalidation (§4.4), targeted cache-control (RFC 9213), Cache-Status (RFC 9211)
 * and the variant bound, over real HTTP on Express 5 and 4.
 */
import type { RequestHandler } from 'express'
import { describe, expect, it } from 'vitest'
import { cacheRoute } from '../../src/express/index.js'
import { redisAvailable } from '../support/redis.js'
import { raw, sleep, useRouteHarness } from './helpers.js'
import { EXPRESS_VERSIONS } from './versions.js'

describe.skipIf(!redisAvailable).each(EXPRESS_VERSIONS)('RFC features ($name)', ({ express }) => {
  const h = useRouteHarness({ express })

  describe('invalidation (RFC 9111 §4.4)', () => {
    const versioned = () => {
      let version = 1
      const handler: RequestHandler = (req, res) => {
        if (req.method === 'GET') return void res.send(`v${version}`)
        version++
        res.status(200).end()
      }
      return handler
    }

    for (const method of ['PURGE', 'MKCOL', 'PROPPATCH', 'LOCK']) {
      it(`a 2xx to ${method} (a method whose safety is unknown) invalidates the target URI`, async () => {
        const served = await h.route(versioned())
        await served.get('/r')
        expect((await served.get('/r')).headers['x-cache']).toBe('HIT')
        expect((await raw(served.port, '/r', { method })).status).toBe(200)
        expect((await served.get('/r')).text).toBe('v2')
      })
    }

    it('OPTIONS and TRACE-like safe methods do not invalidate', async () => {
      const served = await h.route(versioned())
      await served.get('/r')
      await served.call('options', '/r')
      expect((await served.get('/r')).headers['x-cache']).toBe('HIT')
    })

    it('a POST invalidates the same-origin URLs its Location and Content-Location name, not another host', async () => {
      let version = 1
      const served = await h.app((app, cache) => {
        const route = cacheRoute(cache, { ttl: '30s', xCacheHeader: true })
        app.all('/items/:id', route, (req, res) => void res.send(`${req.params.id} v${version}`))
        app.post('/items', route, (req, res) => {
          version++
          const target = String(req.query.to)
          res.status(201).set('Location', target).set('Content-Location', '../items/2').end()
        })
      })
      for (const id of ['1', '2', '3']) await served.get(`/items/${id}`)
      await served.post('/items?to=/items/1')
      expect((await served.get('/items/1')).text).toBe('1 v2') // Location (origin-form)
      expect((await served.get('/items/2')).text).toBe('2 v2') // Content-Location (relative)
      expect((await served.get('/items/3')).headers['x-cache']).toBe('HIT')
      await served.post('/items?to=http://elsewhere.test/items/3')
      expect((await served.get('/items/3')).headers['x-cache']).toBe('HIT') // another host: untouched
      await served.post('/items?to=http://shop.test/items/3')
      expect((await served.get('/items/3')).text).toBe('3 v4') // absolute, same host
    })
  })

  describe('targeted cache-control (RFC 9213)', () => {
    it('CDN-Cache-Control takes precedence over Cache-Control and Expires, and is sent on', async () => {
      const served = await h.route((_req, res) => {
        res.set({ 'Cache-Control': 'no-store', 'CDN-Cache-Control': 'max-age=60', Expires: '0' })
        res.send(`run ${h.runs()}`)
      })
      await served.get('/r')
      const second = await served.get('/r')
      expect(second.headers['x-cache']).toBe('HIT')
      expect(second.headers['cdn-cache-control']).toBe('max-age=60')
      expect(second.headers['cache-control']).toBe('no-store') // for browsers, as sent
    })

    it('CDN-Cache-Control: no-store stops storing what Cache-Control allows', async () => {
      const served = await h.route((_req, res) => {
        res.set({ 'Cache-Control': 'max-age=60', 'CDN-Cache-Control': 'no-store' }).send('x')
      })
      await served.get('/r')
      expect((await served.get('/r')).headers['x-cache']).toBe('BYPASS')
    })

    it('an invalid CDN-Cache-Control (not a structured dictionary) is ignored: Cache-Control applies', async () => {
      const served = await h.route((_req, res) => {
        res.set({ 'Cache-Control': 'max-age=60', 'CDN-Cache-Control': 'no-store, max-age=' }).send('x')
      })
      await served.get('/r')
      expect((await served.get('/r')).headers['x-cache']).toBe('HIT')
    })

    it("the route's own field (Surrogate-Control) wins over CDN-Cache-Control and is stripped before clients", async () => {
      const served = await h.route(
        (_req, res) => {
          res.set({ 'Surrogate-Control': 'max-age=60', 'CDN-Cache-Control': 'no-store', 'Cache-Control': 'no-store' })
          res.send('x')
        },
        { targetedCacheControl: 'Surrogate-Control' },
      )
      const miss = await served.get('/r')
      expect(miss.headers['surrogate-control']).toBeUndefined()
      const hit = await served.get('/r')
      expect(hit.headers['x-cache']).toBe('HIT')
      expect(hit.headers['surrogate-control']).toBeUndefined()
      expect(hit.headers['cdn-cache-control']).toBe('no-store')
    })
  })

  describe('Cache-Status (RFC 9211)', () => {
    it('names the cache, and says hit, uri-miss + stored, and the real reason of a pass', async () => {
      const served = await h.route(
        (req, res) => {
          if (req.query.static) res.set('Cache-Control', 'public, max-age=0') // what express.static sends by default
          if (req.get('x-no-etag')) return void res.end('x')
          res.send('x')
        },
        { cacheStatus: 'stampede-guard', xCacheHeader: false },
      )
      expect((await served.get('/r')).headers['cache-status']).toBe('stampede-guard; fwd=uri-miss; stored')
      // The leader's client gets its answer before the commit lands, so a request right after
      // it may still join that commit (collapsed) instead of hitting: either way, served from the
      // cache and the handler ran once.
      expect((await served.get('/r')).headers['cache-status']).toMatch(
        /^stampede-guard; (hit|fwd=uri-miss; collapsed); ttl=(29|30)$/,
      )
      expect(h.runs()).toBe(1)
      // With its ETag it is kept and revalidated; without one it cannot be, and says why.
      expect((await served.get('/r?static=1')).headers['cache-status']).toBe('stampede-guard; fwd=uri-miss; stored')
      await sleep(50) // past the core's 1 ms freshness (within it, the request passes by: detail=must-revalidate)
      // On a loaded machine a request may still land inside the entry's 1 ms core freshness
      // (or the core's timing tolerance): then it passes by, saying so. Never a plain hit.
      const mustRevalidate = 'stampede-guard; fwd=bypass; detail=must-revalidate'
      expect([mustRevalidate, 'stampede-guard; fwd=stale; fwd-status=304; stored']).toContain(
        (await served.get('/r?static=1')).headers['cache-status'],
      )
      await sleep(50)
      expect([mustRevalidate, 'stampede-guard; fwd=stale; detail=expired']).toContain(
        (await served.get('/r?static=1').set('X-No-Etag', '1')).headers['cache-status'],
      )
      expect((await served.get('/r').set('Cookie', 'a=1')).headers['cache-status']).toBe(
        'stampede-guard; fwd=request; detail=cookie',
      )
      expect((await served.call('options', '/r')).headers['cache-status']).toBeUndefined()
    })

    it('a HEAD to a route with its own HEAD handler says fwd=method', async () => {
      const served = await h.app((app, cache) => {
        app
          .route('/p')
          .all(cacheRoute(cache, { ttl: '30s', cacheStatus: 'edge' }))
          .head((_req, res) => void res.end())
          .get((_req, res) => void res.send('x'))
      })
      expect((await served.head('/p')).headers['cache-status']).toBe('edge; fwd=method; detail=head-handler')
    })

    it('can be sent together with X-Cache, and a name that is not a token is quoted', async () => {
      const served = await h.route((_req, res) => void res.send('x'), { cacheStatus: 'my cache' })
      const miss = await served.get('/r')
      expect(miss.headers['x-cache']).toBe('MISS')
      expect(miss.headers['cache-status']).toBe('"my cache"; fwd=uri-miss; stored')
    })
  })

  describe('maxVariantsPerUrl', () => {
    it('Vary: User-Agent with 40 agents stores 3 variants (maxVariantsPerUrl 3); the others pass by, nothing grows', async () => {
      const served = await h.route(
        (req, res) => void res.set('Vary', 'User-Agent').send(`for ${req.get('user-agent')}`),
        {
          maxVariantsPerUrl: 3,
          cacheStatus: 'sg',
        },
      )
      for (let i = 0; i < 3; i++) await served.get('/r').set('User-Agent', `agent-${i}`)
      const redis = h.redis().client()
      const keysWithThree = await redis.dbsize()
      const seen: string[] = []
      for (let i = 3; i < 40; i++) {
        const res = await served.get('/r').set('User-Agent', `agent-${i}`)
        expect(res.text).toBe(`for agent-${i}`)
        seen.push(String(res.headers['cache-status']))
      }
      expect(new Set(seen)).toEqual(new Set(['sg; fwd=bypass; detail=variant-limit']))
      expect(await redis.dbsize()).toBeLessThanOrEqual(keysWithThree) // (a lock key may have expired meanwhile)
      redis.disconnect()
      const known = await served.get('/r').set('User-Agent', 'agent-1')
      expect([known.headers['x-cache'], known.text]).toEqual(['HIT', 'for agent-1'])
    })
  })
})
