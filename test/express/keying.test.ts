/**
 * Rule 7 / acceptance 11 (keys and cache poisoning) and rule 18 (request directives
 * cannot force origin work).
 */
import { createHash } from 'node:crypto'
import type { RequestHandler } from 'express'
import { describe, expect, it } from 'vitest'
import type { CacheRouteOptions } from '../../src/express/index.js'
import { redisAvailable } from '../support/redis.js'
import { raw, useRouteHarness } from './helpers.js'

describe.skipIf(!redisAvailable)('keys, poisoning, request directives', () => {
  const { route, runs } = useRouteHarness({
    method: 'get',
    configure: (application) => application.set('trust proxy', true), // req.hostname now reads X-Forwarded-Host: the classic unkeyed input
  })

  const app = (handler: RequestHandler, options: Partial<CacheRouteOptions> = {}, path = '/r') =>
    route(handler, options, { path })

  /** A page that builds an absolute link from req.hostname, as many apps do. */
  const linkPage: RequestHandler = (req, res) => void res.send(`<a href="https://${req.hostname}/checkout">buy</a>`)

  describe('acceptance 11: a forged X-Forwarded-Host cannot poison the entry other users get', () => {
    for (const [name, value] of [
      ['X-Forwarded-Host', 'evil.test'],
      ['X-Host', 'evil.test'],
      ['Forwarded', 'for=1.2.3.4;host=evil.test'],
    ] as const) {
      it(`${name} on a cold entry`, async () => {
        const server = await app(linkPage)
        const attack = await server.get('/r').set(name, value)
        expect(attack.headers['x-cache']).toBe('BYPASS') // passed by, never stored
        const victim = await server.get('/r')
        expect(victim.text).toBe('<a href="https://shop.test/checkout">buy</a>')
        expect((await server.get('/r').set(name, value)).headers['x-cache']).toBe('BYPASS')
        expect((await server.get('/r')).text).toBe('<a href="https://shop.test/checkout">buy</a>')
      })
    }

    it('a forwarded host equal to Host (a well-behaved proxy) is cached as usual', async () => {
      const server = await app(linkPage)
      await server.get('/r').set('X-Forwarded-Host', 'shop.test')
      expect((await server.get('/r').set('X-Forwarded-Host', 'shop.test')).headers['x-cache']).toBe('HIT')
    })
  })

  describe('the scheme: X-Forwarded-Proto is what req.protocol reads when trust proxy is on', () => {
    /** Builds a link from req.protocol and req.hostname, as apps behind a TLS proxy do. */
    const schemePage: RequestHandler = (req, res) =>
      void res.send(`<script src="${req.protocol}://${req.hostname}/app.js"></script>`)

    it('a forged X-Forwarded-Proto that is not http or https passes by, never stored', async () => {
      const server = await app(schemePage)
      const attack = await server.get('/r').set('X-Forwarded-Proto', 'https://evil.example/x?')
      expect(attack.headers['x-cache']).toBe('BYPASS')
      const victim = await server.get('/r')
      expect(victim.text).toBe('<script src="http://shop.test/app.js"></script>')
      expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
    })

    it('is part of the key: requests forwarded as https and plain http requests never share an entry', async () => {
      const server = await app(schemePage)
      for (let i = 0; i < 2; i++) {
        const https = await server.get('/r').set('X-Forwarded-Proto', 'https')
        const http = await server.get('/r')
        expect(https.text).toBe('<script src="https://shop.test/app.js"></script>')
        expect(http.text).toBe('<script src="http://shop.test/app.js"></script>')
        expect([https.headers['x-cache'], http.headers['x-cache']]).toEqual(i === 0 ? ['MISS', 'MISS'] : ['HIT', 'HIT'])
      }
      expect(runs()).toBe(2)
    })

    it('a Forwarded proto= that differs from req.protocol passes by; one that agrees is cached', async () => {
      const server = await app(schemePage)
      expect((await server.get('/r').set('Forwarded', 'for=1.2.3.4;proto=https')).headers['x-cache']).toBe('BYPASS')
      const agreeing = () =>
        server.get('/r').set('Forwarded', 'for=1.2.3.4;proto=https').set('X-Forwarded-Proto', 'https')
      await agreeing()
      expect((await agreeing()).headers['x-cache']).toBe('HIT')
    })
  })

  describe('rule 7: the key', () => {
    it('includes the validated Host: two hosts never share an entry; an invalid Host bypasses', async () => {
      const server = await app((req, res) => void res.send(`host ${req.headers.host}`))
      const a = await raw(server.port, '/r', { headers: { host: 'a.test' } })
      const b = await raw(server.port, '/r', { headers: { host: 'b.test' } })
      const a2 = await raw(server.port, '/r', { headers: { host: 'a.test' } })
      expect([a.body.toString(), b.body.toString(), a2.body.toString()]).toEqual([
        'host a.test',
        'host b.test',
        'host a.test',
      ])
      expect(a2.headers['x-cache']).toBe('HIT')
      // Not lower-case: the handler would see (and reflect) this spelling, so it passes by.
      const upper = await raw(server.port, '/r', { headers: { host: 'A.TEST' } })
      expect([upper.body.toString(), upper.headers['x-cache']]).toEqual(['host A.TEST', 'BYPASS'])
      const bad = await raw(server.port, '/r', { headers: { host: 'evil.test/../x' } })
      expect(bad.headers['x-cache']).toBe('BYPASS')
    })

    it('honours allowedHosts', async () => {
      const server = await app((req, res) => void res.send(`host ${req.headers.host}`), { allowedHosts: ['shop.test'] })
      await server.get('/r')
      expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
      expect((await raw(server.port, '/r', { headers: { host: 'other.test' } })).headers['x-cache']).toBe('BYPASS')
    })

    it('includes the path and the full query string, without reordering it', async () => {
      const server = await app((req, res) => void res.send(`${req.originalUrl}`), {}, '/r{*rest}')
      const urls = ['/r?a=1', '/r?a=2', '/r?a=1&b=2', '/r?b=2&a=1', '/r/x', '/r?a=1']
      const bodies = []
      for (const url of urls) bodies.push((await server.get(url)).text)
      expect(bodies).toEqual(urls)
      expect(runs()).toBe(5)
    })

    it("a '#' in the request-target cannot reach the key of a long (hashed) URL", async () => {
      const server = await app(
        (req, res) => void res.send(req.originalUrl.length > 256 ? 'search results' : 'home page'),
        {},
        '/{*rest}',
      )
      const long = `/search?q=${'a'.repeat(300)}`
      const digest = createHash('sha256').update(long).digest('base64url').slice(0, 43)
      const attack = await raw(server.port, `/#sha256:${digest}`)
      expect(attack.body.toString()).toBe('home page')
      const victim = await raw(server.port, long)
      expect(victim.body.toString()).toBe('search results')
      expect(runs()).toBe(2)
    })

    it('a custom key function decides (here: two URLs, one product)', async () => {
      const server = await app(
        (req, res) => void res.send(`product ${req.params.id} via ${req.path}`),
        { key: (req) => `product:${req.params.id}` },
        '/:kind/:id',
      )
      expect((await server.get('/p/7')).text).toBe('product 7 via /p/7')
      const alias = await server.get('/product/7')
      expect(alias.headers['x-cache']).toBe('HIT')
      expect(alias.text).toBe('product 7 via /p/7')
      expect((await server.get('/p/8')).text).toBe('product 8 via /p/8')
    })

    it('a key function that throws fails open', async () => {
      const errors: unknown[] = []
      const server = await app((_req, res) => void res.send('ok'), {
        key: () => {
          throw new Error('bad key')
        },
        onError: (error) => errors.push(error),
      })
      const res = await server.get('/r')
      expect(res.status).toBe(200)
      expect(res.headers['x-cache']).toBe('BYPASS')
      expect(errors).toHaveLength(1)
    })
  })

  describe('rule 18: request directives', () => {
    it('ignores request Cache-Control: no-cache and Pragma: no-cache (no forced origin work)', async () => {
      const server = await app((_req, res) => void res.send('page'))
      await server.get('/r')
      expect((await server.get('/r').set('Cache-Control', 'no-cache')).headers['x-cache']).toBe('HIT')
      expect((await server.get('/r').set('Cache-Control', 'no-store, max-age=0')).headers['x-cache']).toBe('HIT')
      expect((await server.get('/r').set('Pragma', 'no-cache')).headers['x-cache']).toBe('HIT')
      expect(runs()).toBe(1)
    })

    it('a bypass is opt-in, through the bypass option', async () => {
      const server = await app((_req, res) => void res.send(`run ${runs()}`), {
        bypass: (req) => req.headers['x-purge-token'] === 'secret',
      })
      await server.get('/r')
      expect((await server.get('/r').set('X-Purge-Token', 'guess')).headers['x-cache']).toBe('HIT')
      const bypassed = await server.get('/r').set('X-Purge-Token', 'secret')
      expect(bypassed.headers['x-cache']).toBe('BYPASS')
      expect(bypassed.text).toBe('run 2')
    })
  })
})
