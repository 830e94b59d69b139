/**
 * Rules 9-11 / acceptance 6: freshness lifetime, stale-while-revalidate (served at once,
 * refreshed once in the background) and stale-if-error (a handler that throws, answers
 * 5xx or is too slow), and the responses that must never be served stale.
 */
import compression from 'compression'
import type { RequestHandler } from 'express'
import { describe, expect, it } from 'vitest'
import type { CacheRouteOptions } from '../../src/express/index.js'
import { redisAvailable } from '../support/redis.js'
import { gate, raw, sleep, until, useRouteHarness } from './helpers.js'
import { gunzipSync } from 'node:zlib'

describe.skipIf(!redisAvailable)('freshness and stale serving', () => {
  const { route, runs } = useRouteHarness({ method: 'get' })
  /** The handler runs inside an async function: a throw reaches Express as a rejected promise. */
  const app = (handler: RequestHandler, options: Partial<CacheRouteOptions> = {}) =>
    route(async (req, res, next) => handler(req, res, next), options)

  describe('rule 9: freshness lifetime', () => {
    it("is the route's ttl at most: a response's longer lifetime does not lengthen it (without honorCacheControl)", async () => {
      const server = await app((_req, res) => void res.set('Cache-Control', 'max-age=3600').send(`run ${runs()}`), {
        ttl: 1000,
      })
      await server.get('/r')
      await sleep(1300)
      expect((await server.get('/r')).headers['x-cache']).toBe('MISS')
    })

    it('with honorCacheControl: s-maxage > max-age > Expires − Date, else the route ttl', async () => {
      const cases: Record<string, Record<string, string>> = {
        's-maxage-wins': { 'Cache-Control': 'max-age=60, s-maxage=1' },
        'max-age': { 'Cache-Control': 'max-age=1' },
        expires: {}, // Date and Expires set as the response is made, below
        'long-lived': { 'Cache-Control': 'max-age=60' },
        unstated: {},
      }
      const server = await app(
        (req, res) => {
          // A Date in the past counts as age already spent (RFC 9111 §4.2.3): made per response.
          if (req.query.case === 'expires')
            res.set({ Date: new Date().toUTCString(), Expires: new Date(Date.now() + 1000).toUTCString() })
          res.set(cases[req.query.case as string]!).send(`run ${runs()}`)
        },
        {
          ttl: '1s',
          honorCacheControl: true,
        },
      )
      for (const name of Object.keys(cases)) await server.get(`/r?case=${name}`)
      await sleep(1500)
      const after: Record<string, string> = {}
      for (const name of Object.keys(cases)) after[name] = (await server.get(`/r?case=${name}`)).headers['x-cache']!
      expect(after).toEqual({
        's-maxage-wins': 'MISS',
        'max-age': 'MISS',
        expires: 'MISS',
        'long-lived': 'HIT',
        unstated: 'MISS',
      })
    })

    it('maxTtl clamps a lifetime taken from the response; an already-stale response is not stored', async () => {
      const server = await app(
        (req, res) =>
          void res.set('Cache-Control', req.query.zero ? 'max-age=0' : 'max-age=3600').send(`run ${runs()}`),
        { ttl: '30s', honorCacheControl: true, maxTtl: 1000, etag: false }, // no validator: max-age=0 is not kept
      )
      await server.get('/r')
      await server.get('/r?zero=1')
      expect((await server.get('/r?zero=1')).headers['x-cache']).toBe('BYPASS')
      await sleep(1300)
      expect((await server.get('/r')).headers['x-cache']).toBe('MISS')
    })
  })

  describe('rule 10: stale-while-revalidate', () => {
    it('serves the stale response at once and refreshes it once, in the background', async () => {
      const refresh = gate()
      const server = await app(
        async (_req, res) => {
          if (runs() > 1) await refresh.promise
          res.send(`version ${runs()}`)
        },
        { ttl: 300, staleTtl: '30s' },
      )
      expect((await server.get('/r')).text).toBe('version 1')
      await sleep(400)
      // Ten requests while the refresh is held: all answered stale, one refresh.
      const stale = await Promise.all(Array.from({ length: 10 }, () => server.get('/r')))
      expect(stale.map((r) => r.text)).toEqual(Array(10).fill('version 1'))
      expect(stale.every((r) => r.headers['x-cache'] === 'STALE')).toBe(true)
      await until(() => runs() === 2, 'the background refresh to start')
      refresh.open()
      await until(async () => (await server.get('/r')).text === 'version 2', 'the refreshed response')
      expect(runs()).toBe(2)
      expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
    })

    for (const position of ['before', 'after'] as const) {
      it(`refreshes in the background through compression ${position} cacheRoute, per variant`, async () => {
        const squeeze = compression({ threshold: 0 })
        const handler: RequestHandler = (req, res) => {
          res
            .set('Vary', 'Accept-Language')
            .type('text')
            .send(`${req.headers['accept-language']} version ${runs()} `.repeat(50))
        }
        const served = await route(handler, { ttl: 300, staleTtl: '30s' }, { [position]: [squeeze] })
        const get = (language: string) =>
          raw(served.port, '/r', { headers: { 'accept-language': language, 'accept-encoding': 'gzip' } })
        const text = (res: Awaited<ReturnType<typeof get>>) => gunzipSync(res.body).toString().slice(0, 12)
        expect(text(await get('en'))).toBe('en version 1')
        expect(text(await get('fr'))).toBe('fr version 2')
        await sleep(400)
        const stale = await get('fr')
        expect(stale.headers['x-cache']).toBe('STALE')
        expect(stale.headers['content-encoding']).toBe('gzip')
        expect(text(stale)).toBe('fr version 2')
        await until(async () => text(await get('fr')) === 'fr version 3', 'the background refresh')
        const fresh = await get('fr')
        expect(fresh.headers['x-cache']).toBe('HIT')
        expect(text(await get('en'))).toMatch(/^en version [14]$/) // en: stale (1) or refreshed (4), never another variant
      })
    }

    it("the response's own stale-while-revalidate sets the window (honorCacheControl)", async () => {
      const server = await app(
        (_req, res) => void res.set('Cache-Control', 'max-age=1, stale-while-revalidate=30').send(`version ${runs()}`),
        { ttl: '30s', honorCacheControl: true },
      )
      await server.get('/r')
      await sleep(1300)
      const res = await server.get('/r')
      expect(res.headers['x-cache']).toBe('STALE')
      expect(res.text).toBe('version 1')
    })
  })

  describe('rule 11: stale-if-error', () => {
    for (const failure of ['throws', '500', '502', '503', '504']) {
      it(`covers a handler that ${failure === 'throws' ? 'throws' : `answers ${failure}`}`, async () => {
        const server = await app(
          (_req, res) => {
            if (runs() === 1) return void res.send('good')
            if (failure === 'throws') throw new Error('database down')
            res.status(Number(failure)).send('bad')
          },
          { ttl: 200, staleIfError: '30s' },
        )
        await server.get('/r')
        await sleep(300)
        const res = await server.get('/r')
        expect(res.status).toBe(200)
        expect(res.text).toBe('good')
        expect(res.headers['x-cache']).toBe('STALE')
        expect(runs()).toBe(2)
      })
    }

    it('covers a handler slower than softTimeout, which still fills the cache when done', async () => {
      const slow = gate()
      const server = await app(
        async (_req, res) => {
          if (runs() > 1) await slow.promise
          res.send(`version ${runs()}`)
        },
        { ttl: 200, staleIfError: '30s', softTimeout: 100 },
      )
      await server.get('/r')
      await sleep(300)
      const res = await server.get('/r')
      expect(res.text).toBe('version 1')
      expect(res.headers['x-cache']).toBe('STALE')
      slow.open()
      await until(async () => (await server.get('/r')).text === 'version 2', 'the slow load to fill the cache')
      expect(runs()).toBe(2)
    })

    it('without a stale response, the error reaches the client as is, uncached', async () => {
      const server = await app(
        () => {
          throw new Error('boom')
        },
        { staleIfError: '30s' },
      )
      for (let i = 0; i < 2; i++) {
        const res = await server.get('/r')
        expect(res.status).toBe(500)
        expect(res.headers['x-cache']).toBe('BYPASS')
      }
      expect(runs()).toBe(2)
    })

    for (const directive of ['must-revalidate', 'proxy-revalidate', 's-maxage=30']) {
      it(`never serves stale when the stored response says ${directive}`, async () => {
        const server = await app(
          (_req, res) => {
            if (runs() > 1) return void res.status(503).send('down')
            res.set('Cache-Control', directive).send('good')
          },
          { ttl: 200, staleTtl: '30s', staleIfError: '30s' },
        )
        await server.get('/r')
        await sleep(300)
        const res = await server.get('/r')
        expect(res.status).toBe(503)
        expect(res.text).toBe('down')
      })
    }
  })
})
