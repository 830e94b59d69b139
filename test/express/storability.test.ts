/**
 * HTTP-CACHING.md rules 1-6 (issue 4, acceptance 1): every response that must not be
 * stored is shown not stored, and its request still answered correctly.
 */
import { describe, expect, it } from 'vitest'
import { cacheRoute } from '../../src/express/index.js'
import { redisAvailable } from '../support/redis.js'
import type { NextFunction, Request, Response } from 'express'
import { raw, sleep, until, useRouteHarness, type Served } from './helpers.js'

describe.skipIf(!redisAvailable)('what is stored', () => {
  /** One route, `/r`, for every method, behind cacheRoute. */
  const { route, runs, cache } = useRouteHarness()

  /** Two identical GETs: the handler must run for both, and both get its answer. */
  async function expectNotStored(
    server: Served,
    check: (res: { status: number; text: string; headers: Record<string, string> }) => void,
  ) {
    const first = await server.get('/r')
    const second = await server.get('/r')
    for (const res of [first, second]) {
      check(res)
      expect(res.headers['x-cache']).toBe('BYPASS')
    }
    expect(runs()).toBe(2)
  }

  describe('rule 1: methods', () => {
    it('stores GET and answers HEAD from the GET entry, without a body', async () => {
      const server = await route((_req, res) => void res.type('text').send('hello'))
      const miss = await server.get('/r')
      const head = await server.head('/r')
      expect(miss.headers['x-cache']).toBe('MISS')
      expect(head.status).toBe(200)
      expect(head.headers['x-cache']).toBe('HIT')
      expect(head.headers['content-length']).toBe('5')
      expect(head.text).toBeUndefined()
      expect(runs()).toBe(1)
    })

    it('a cold HEAD fills the entry that a later GET is served from, body included', async () => {
      const server = await route((req, res) => void res.type('text').send(`seen as ${req.method}`))
      const head = await raw(server.port, '/r', { method: 'HEAD' })
      expect(head.body.length).toBe(0)
      expect(head.headers['content-length']).toBe(String('seen as GET'.length))
      const get = await server.get('/r')
      expect(get.headers['x-cache']).toBe('HIT')
      expect(get.text).toBe('seen as GET')
      expect(runs()).toBe(1)
    })

    it('never stores or serves unsafe methods, and a 2xx/3xx answer to one invalidates the URL', async () => {
      let version = 1
      const server = await route((req, res) => {
        if (req.method === 'GET') return void res.send(`v${version}`)
        if (req.query.fail) return void res.status(409).send('conflict')
        version++
        res.status(req.method === 'DELETE' ? 204 : 201).send('ok')
      })
      expect((await server.get('/r')).text).toBe('v1')
      for (const method of ['post', 'put', 'patch', 'delete'] as const) {
        expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
        const unsafe = await server.call(method, '/r')
        expect(unsafe.status).toBe(method === 'delete' ? 204 : 201)
        const after = await server.get('/r')
        expect(after.headers['x-cache']).toBe('MISS')
        expect(after.text).toBe(`v${version}`)
      }
    })

    it('an unsafe request invalidates the URL for both schemes (X-Forwarded-Proto, trust proxy on)', async () => {
      let version = 1
      const server = await route(
        (req, res) =>
          void (req.method === 'GET' ? res.send(`${req.protocol} v${version}`) : (version++, res.status(204).end())),
        {},
        {
          before: [(req, _res, next) => (req.app.set('trust proxy', true), next())],
        },
      )
      const https = () => server.get('/r').set('X-Forwarded-Proto', 'https')
      await https()
      await server.get('/r')
      expect((await https()).headers['x-cache']).toBe('HIT')
      expect((await server.post('/r')).status).toBe(204) // over plain http
      expect((await https()).text).toBe('https v2')
      expect((await server.get('/r')).text).toBe('http v2')
    })

    it('an unsafe request that fails (4xx) does not invalidate', async () => {
      const server = await route(
        (req, res) => void (req.method === 'GET' ? res.send('v1') : res.status(409).send('no')),
      )
      await server.get('/r')
      expect((await server.post('/r')).status).toBe(409)
      expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
      expect(runs()).toBe(2)
    })

    it('passes other methods (OPTIONS) through untouched', async () => {
      const server = await route((_req, res) => void res.set('Allow', 'GET').status(204).end())
      for (let i = 0; i < 2; i++) {
        const res = await server.call('options', '/r')
        expect(res.status).toBe(204)
        expect(res.headers['x-cache']).toBeUndefined()
      }
      expect(runs()).toBe(2)
    })
  })

  describe('rule 2: response directives that forbid storing', () => {
    for (const cacheControl of ['no-store', 'private', 'no-cache', 'private, max-age=60', 'max-age=60, No-Store']) {
      it(`Cache-Control: ${cacheControl}`, async () => {
        // etag: false: with a validator, no-cache is stored to be revalidated (revalidation.test.ts).
        const server = await route((_req, res) => void res.set('Cache-Control', cacheControl).send('mine'), {
          etag: false,
        })
        await expectNotStored(server, (res) => {
          expect(res.status).toBe(200)
          expect(res.text).toBe('mine')
          expect(res.headers['cache-control']).toBe(cacheControl)
        })
      })
    }

    it('directives passed as writeHead(status, undefined, headers) count, as Node reads them', async () => {
      const server = await route((_req, res) => {
        res.writeHead(200, undefined as unknown as string, {
          'Content-Type': 'application/json',
          'Cache-Control': 'no-store',
        })
        res.end('{"secret":1}')
      })
      await expectNotStored(server, (res) => {
        expect(res.headers['content-type']).toBe('application/json')
        expect(res.headers['cache-control']).toBe('no-store')
      })
    })

    it('Vary: *', async () => {
      const server = await route((_req, res) => void res.set('Vary', 'Accept, *').send('varies'))
      await expectNotStored(server, (res) => expect(res.text).toBe('varies'))
    })
  })

  describe('rule 3: credentials', () => {
    it('a request with Authorization is neither served from the cache nor stored', async () => {
      const server = await route(
        (req, res) =>
          void res.send(req.headers.authorization ? `secret of ${req.headers.authorization}` : 'public page'),
      )
      expect((await server.get('/r')).text).toBe('public page')
      const authorized = await server.get('/r').set('Authorization', 'Bearer alice')
      expect(authorized.text).toBe('secret of Bearer alice')
      expect(authorized.headers['x-cache']).toBe('BYPASS')
      const anonymous = await server.get('/r')
      expect(anonymous.text).toBe('public page')
      expect(anonymous.headers['x-cache']).toBe('HIT')
      expect(runs()).toBe(2)
    })

    for (const shared of ['public, max-age=60', 's-maxage=60', 'must-revalidate']) {
      it(`...unless the response says ${shared} (RFC 9111 §3.5): then it is stored`, async () => {
        const server = await route((_req, res) => void res.set('Cache-Control', shared).send('shared catalogue'))
        const authorized = await server.get('/r').set('Authorization', 'Bearer alice')
        expect(authorized.headers['x-cache']).toBe('BYPASS')
        const anonymous = await server.get('/r')
        expect(anonymous.text).toBe('shared catalogue')
        expect(anonymous.headers['x-cache']).toBe('HIT')
        expect(runs()).toBe(1)
      })
    }

    it('a request with Cookie passes by: not served from the cache, not stored', async () => {
      const server = await route(
        (req, res) => void res.send(req.headers.cookie ? `cart of ${req.headers.cookie}` : 'empty cart'),
      )
      await server.get('/r')
      for (let i = 0; i < 2; i++) {
        const withCookie = await server.get('/r').set('Cookie', 'sid=bob')
        expect(withCookie.text).toBe('cart of sid=bob')
        expect(withCookie.headers['x-cache']).toBe('BYPASS')
      }
      expect((await server.get('/r')).text).toBe('empty cart')
      expect(runs()).toBe(3)
    })

    it('a response with Set-Cookie is not stored, and so never replayed to anyone else', async () => {
      let session = 0
      const server = await route((_req, res) => void res.cookie('sid', `s${++session}`).send('welcome'))
      const first = await server.get('/r')
      const second = await server.get('/r')
      expect(first.headers['set-cookie']?.[0]).toMatch(/^sid=s1;/)
      expect(second.headers['set-cookie']?.[0]).toMatch(/^sid=s2;/)
      expect(second.headers['x-cache']).toBe('BYPASS')
      expect(runs()).toBe(2)
    })

    describe('a Set-Cookie added as the head goes out (on-headers hook of a session middleware before cacheRoute)', () => {
      /**
       * A minimal express-session (saveUninitialized: false): a new session per request,
       * whose cookie is set in a writeHead wrapper, as on-headers does, only if the handler
       * put something in it.
       */
      let sessions = 0
      const session = (req: Request, res: Response, next: NextFunction) => {
        const id = `s${++sessions}`
        const data: Record<string, string> = {}
        ;(req as Request & { session: Record<string, string> }).session = data
        const writeHead = res.writeHead
        res.writeHead = function (this: Response, ...args: unknown[]) {
          if (Object.keys(data).length) this.setHeader('Set-Cookie', `sid=${id}; HttpOnly`)
          return (writeHead as (...a: unknown[]) => Response).apply(this, args)
        } as Response['writeHead']
        next()
      }
      const csrfPage = (req: Request, res: Response, touch: boolean) => {
        const token = `token-${runs()}`
        if (touch) (req as Request & { session: Record<string, string> }).session.csrf = token
        res.send(`<form><input name=csrf value=${token}></form>`)
      }

      it('is seen before the response is stored: the page is never replayed to another client', async () => {
        const server = await route((req, res) => csrfPage(req, res, true), {}, { before: [session] })
        const a = await server.get('/r')
        const b = await server.get('/r')
        expect(a.headers['set-cookie']?.[0]).toMatch(/^sid=s\d+; HttpOnly$/)
        expect(b.headers['set-cookie']?.[0]).toMatch(/^sid=s\d+; HttpOnly$/)
        expect(b.headers['set-cookie']).not.toEqual(a.headers['set-cookie'])
        expect(b.text).toBe('<form><input name=csrf value=token-2></form>')
        expect(b.headers['x-cache']).toBe('BYPASS')
        expect(runs()).toBe(2)
      })

      it('...also for an Authorization request whose response says public', async () => {
        const server = await route(
          (req, res) => {
            res.set('Cache-Control', 'public, max-age=60')
            csrfPage(req, res, true)
          },
          {},
          { before: [session] },
        )
        expect((await server.get('/r').set('Authorization', 'Bearer alice')).headers['set-cookie']).toBeDefined()
        const anonymous = await server.get('/r')
        expect(anonymous.text).toBe('<form><input name=csrf value=token-2></form>')
        expect(runs()).toBe(2)
      })

      it('once seen on a route, responses whose head cannot go out first (background refresh) are not stored', async () => {
        const server = await route(
          (req, res) => csrfPage(req, res, req.query.page === 'login' || runs() >= 3),
          { ttl: 200, staleTtl: '30s' },
          { before: [session] },
        )
        expect((await server.get('/r?page=home')).headers['x-cache']).toBe('MISS') // no session: stored
        expect((await server.get('/r?page=login')).headers['set-cookie']).toBeDefined()
        await sleep(300)
        for (let i = 0; i < 3; i++) {
          const home = await server.get('/r?page=home')
          expect(home.text).toBe('<form><input name=csrf value=token-1></form>')
          expect(home.headers['x-cache']).toBe('STALE')
          await sleep(50)
        }
      })
    })

    it('allowAuthenticated keys each identity apart (hash of Authorization/Cookie) and still never stores private', async () => {
      const server = await route(
        (req, res) => void res.send(`hello ${req.headers.authorization ?? req.headers.cookie ?? 'nobody'}`),
        { allowAuthenticated: true },
      )
      const alice1 = await server.get('/r').set('Authorization', 'Bearer alice')
      const bob = await server.get('/r').set('Authorization', 'Bearer bob')
      const alice2 = await server.get('/r').set('Authorization', 'Bearer alice')
      const carol = await server.get('/r').set('Cookie', 'sid=carol')
      const nobody = await server.get('/r')
      expect([alice1.text, bob.text, alice2.text, carol.text, nobody.text]).toEqual([
        'hello Bearer alice',
        'hello Bearer bob',
        'hello Bearer alice',
        'hello sid=carol',
        'hello nobody',
      ])
      expect([alice1, bob, alice2, carol, nobody].map((r) => r.headers['x-cache'])).toEqual([
        'MISS',
        'MISS',
        'HIT',
        'MISS',
        'MISS',
      ])
      expect(runs()).toBe(4)
    })

    it('allowAuthenticated still refuses private responses', async () => {
      const server = await route((_req, res) => void res.set('Cache-Control', 'private').send('yours'), {
        allowAuthenticated: true,
      })
      await server.get('/r').set('Authorization', 'Bearer alice')
      await server.get('/r').set('Authorization', 'Bearer alice')
      expect(runs()).toBe(2)
    })
  })

  describe('rule 4: status codes', () => {
    it('stores the default set with the exact status (404, 301 with Location, 410)', async () => {
      const server = await route((req, res) => {
        if (req.query.s === '301') return void res.redirect(301, '/elsewhere')
        res.status(Number(req.query.s)).send(`status ${req.query.s}`)
      })
      for (const status of ['404', '301', '410']) {
        const first = await raw(server.port, `/r?s=${status}`)
        const second = await raw(server.port, `/r?s=${status}`)
        expect(second.status).toBe(Number(status))
        expect(second.headers['x-cache']).toBe('HIT')
        expect(second.body).toEqual(first.body)
        if (status === '301') expect(second.headers.location).toBe('/elsewhere')
      }
      expect(runs()).toBe(3)
    })

    it('does not store statuses outside the set (201, 302, 500, 503)', async () => {
      const server = await route((req, res) => void res.status(Number(req.query.s)).send(`status ${req.query.s}`))
      for (const status of [201, 302, 500, 503]) {
        for (let i = 0; i < 2; i++) {
          const res = await server.get(`/r?s=${status}`).redirects(0)
          expect(res.status).toBe(status)
          expect(res.headers['x-cache']).toBe('BYPASS')
        }
      }
      expect(runs()).toBe(8)
    })

    it('is configurable per route, and refuses 5xx (other than 501) at startup', async () => {
      const server = await route((_req, res) => void res.status(201).send('created'), { statuses: [201] })
      await server.get('/r')
      expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
      expect(runs()).toBe(1)
      for (const bad of [500, 502, 503, 504, 599])
        expect(() => cacheRoute(cache(), { ttl: '1s', statuses: [200, bad] })).toThrow(/statuses/)
      expect(() => cacheRoute(cache(), { ttl: '1s', statuses: [501] })).not.toThrow()
    })
  })

  describe('rule 5: headers', () => {
    it('strips hop-by-hop headers (and those Connection names) from what it stores and replays', async () => {
      const server = await route((_req, res) => {
        res.set({
          'Keep-Alive': 'timeout=99',
          'Proxy-Authenticate': 'Basic',
          'X-Hop': 'per-connection',
          Connection: 'X-Hop',
          'X-Kept': 'yes',
          Link: ['<a>; rel=a', '<b>; rel=b'],
        })
        res.send('body')
      })
      await server.get('/r')
      const hit = await raw(server.port, '/r')
      expect(hit.headers['x-cache']).toBe('HIT')
      expect(hit.headers['x-kept']).toBe('yes')
      expect(hit.headers.link).toBe('<a>; rel=a, <b>; rel=b')
      expect(hit.headers['x-hop']).toBeUndefined()
      expect(hit.headers['proxy-authenticate']).toBeUndefined()
      expect(hit.headers['keep-alive']).not.toBe('timeout=99')
    })
  })

  describe('rule 6: size', () => {
    it('a body over maxBodyBytes reaches its client whole, and is not stored', async () => {
      const big = Buffer.alloc(300_000, 'x')
      const server = await route((_req, res) => void res.type('bin').send(big), { maxBodyBytes: 100_000 })
      for (let i = 0; i < 2; i++) {
        const res = await raw(server.port, '/r')
        expect(res.status).toBe(200)
        expect(res.body.equals(big)).toBe(true)
        expect(res.headers['x-cache']).toBe('BYPASS')
      }
      expect(runs()).toBe(2)
    })

    it('a released response leaves the request as the client sent it (method, validators) for what observes it', async () => {
      const seen: unknown[] = []
      const logger = (req: Request, res: Response, next: NextFunction) => {
        res.on('finish', () => seen.push([req.method, req.headers['if-none-match']]))
        next()
      }
      const server = await route(
        (_req, res) => void res.type('text').send('x'.repeat(100)),
        { maxBodyBytes: 10 },
        { before: [logger] },
      )
      const head = await raw(server.port, '/r', { method: 'HEAD', headers: { 'if-none-match': '"other"' } })
      expect(head.status).toBe(200)
      await until(() => seen.length === 1, 'the logger')
      expect(seen).toEqual([['HEAD', '"other"']])
    })

    it('a response written in chunks past the bound streams through in order', async () => {
      const server = await route(
        async (_req, res) => {
          res.type('text')
          for (let i = 0; i < 10; i++) {
            res.write(`chunk ${i};`.padEnd(1000, '.'))
            await sleep(5)
          }
          res.end('done')
        },
        { maxBodyBytes: 3000 },
      )
      const res = await raw(server.port, '/r')
      const text = res.body.toString()
      expect(text.match(/chunk \d/g)).toEqual(Array.from({ length: 10 }, (_, i) => `chunk ${i}`))
      expect(text.endsWith('done')).toBe(true)
      await raw(server.port, '/r')
      expect(runs()).toBe(2)
    })

    it('a streamed response (flushHeaders, server-sent events) passes through uncached', async () => {
      const server = await route(async (req, res) => {
        if (req.query.kind === 'sse') res.type('text/event-stream')
        else res.type('text')
        res.flushHeaders()
        res.write('data: one\n\n')
        await sleep(20)
        res.end('data: two\n\n')
      })
      for (const kind of ['sse', 'flush', 'sse']) {
        const res = await raw(server.port, `/r?kind=${kind}`)
        expect(res.body.toString()).toBe('data: one\n\ndata: two\n\n')
        expect(res.headers['x-cache']).toBe('BYPASS')
      }
      expect(runs()).toBe(3)
    })

    it('a response that takes longer than handlerTimeout streams to its client uncached', async () => {
      const server = await route(
        async (_req, res) => {
          res.write('start,')
          await sleep(300)
          res.end('end')
        },
        { handlerTimeout: 100 },
      )
      for (let i = 0; i < 2; i++) expect((await raw(server.port, '/r')).body.toString()).toBe('start,end')
      expect(runs()).toBe(2)
    })
  })
})
