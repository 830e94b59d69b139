/**
 * Poisoning and lost-response holes, each against a real app over HTTP on Express 5 and 4:
 * HEAD filling the GET entry, a method changed after cacheRoute, unkeyed reverse-proxy
 * headers, the leader's client losing its response, and memory on small writes.
 */
import type { RequestHandler } from 'express'
import methodOverride from 'method-override'
import { describe, expect, it } from 'vitest'
import { cacheRoute, createCaptureBudget } from '../../src/express/index.js'
import { redisAvailable } from '../support/redis.js'
import { gate, raw, until, useRouteHarness } from './helpers.js'
import { EXPRESS_VERSIONS } from './versions.js'

describe.skipIf(!redisAvailable).each(EXPRESS_VERSIONS)('security ($name)', ({ express }) => {
  const h = useRouteHarness({ express })

  describe('a HEAD never replaces the GET entry', () => {
    const headHandler: RequestHandler = (_req, res) => {
      res.set('Content-Type', 'text/html').set('X-Head', 'own').end()
    }
    const getHandler: RequestHandler = (_req, res) => {
      res.send('<h1>the full page</h1>')
    }

    it('route().all(cacheRoute).head(h).get(g): a cold HEAD runs its own handler and GET still gets the page', async () => {
      const served = await h.app((app, cache) => {
        app
          .route('/p')
          .all(cacheRoute(cache, { ttl: '30s', xCacheHeader: true }))
          .head(headHandler)
          .get(getHandler)
      })
      const head = await served.head('/p')
      expect(head.status).toBe(200)
      expect(head.headers['x-head']).toBe('own')
      const get = await served.get('/p')
      expect(get.text).toBe('<h1>the full page</h1>')
      expect((await served.get('/p')).text).toBe('<h1>the full page</h1>')
    })

    it('app.head(p, cacheRoute, h) beside app.get(p, cacheRoute, g): a cold HEAD stores nothing for GET', async () => {
      const served = await h.app((app, cache) => {
        app.head('/p', cacheRoute(cache, { ttl: '30s' }), headHandler)
        app.get('/p', cacheRoute(cache, { ttl: '30s' }), getHandler)
      })
      await served.head('/p')
      expect((await served.get('/p')).text).toBe('<h1>the full page</h1>')
    })

    it('a HEAD on a GET-only route is still answered from (and may fill) the GET entry', async () => {
      let runs = 0
      const served = await h.app((app, cache) => {
        app.get('/p', cacheRoute(cache, { ttl: '30s', xCacheHeader: true }), (req, res, next) => {
          runs++
          void getHandler(req as never, res as never, next)
        })
      })
      const head = await served.head('/p')
      expect(head.headers['content-length']).toBe(String('<h1>the full page</h1>'.length))
      const get = await served.get('/p')
      expect([get.text, get.headers['x-cache'], runs]).toEqual(['<h1>the full page</h1>', 'HIT', 1])
    })
  })

  describe('a method changed after cacheRoute (method-override) passes by', () => {
    // A getter function, as method-override's docs show for body and custom fields: unlike
    // its header getter, it adds no `Vary`, so only the method change itself can be seen.
    const getter = (req: { headers: Record<string, unknown> }) => req.headers['x-http-method-override'] as string
    for (const override of ['POST', 'DELETE']) {
      it(`GET with X-HTTP-Method-Override: ${override} stores nothing for the clean GET`, async () => {
        const served = await h.app((app, cache) => {
          app.use('/p', cacheRoute(cache, { ttl: '30s', xCacheHeader: true, cacheStatus: 'sg' }))
          app.use(methodOverride(getter, { methods: ['GET', 'POST'] }))
          app.get('/p', (_req, res) => void res.send('the GET answer'))
          app.post('/p', (_req, res) => void res.send('the POST answer'))
        })
        const attack = await served.get('/p').set('X-HTTP-Method-Override', override)
        expect(attack.text).not.toBe('the GET answer')
        expect(attack.headers['cache-status']).toBe('sg; fwd=uri-miss; detail=altered')
        // The attacker's client is answered inside its handler, before its flight settles: a
        // request right after may join that flight and run uncached. Either way: the GET answer.
        const clean = await served.get('/p')
        expect(clean.text).toBe('the GET answer')
        await until(async () => (await served.get('/p')).headers['x-cache'] === 'HIT', 'the clean GET stored')
        expect((await served.get('/p')).text).toBe('the GET answer')
      })
    }
  })

  describe('reverse-proxy headers are keyed (trust proxy on and off)', () => {
    const family: Array<[string, string]> = [
      ['X-Forwarded-Prefix', '/evil'],
      ['X-Forwarded-Port', '6666'],
      ['X-Forwarded-Scheme', 'javascript'],
      ['X-Forwarded-Ssl', 'on'],
      ['x-forwarded-prefix', '/lower'],
      ['X-Forwarded-Path', '/evil'],
      ['Front-End-Https', 'on'],
      ['X-Url-Scheme', 'https'],
      ['Forwarded', 'by=evil;proto=http'],
      ['X-Original-URL', '/evil'],
      ['X-Original-URI', '/evil'],
      ['X-Rewrite-URL', '/evil'],
    ]
    for (const trust of [true, false]) {
      for (const [name, value] of family) {
        it(`${name}: ${value} (trust proxy ${trust}) is never served to a clean request`, async () => {
          const served = await h.app((app, cache) => {
            app.set('trust proxy', trust)
            app.get('/p', cacheRoute(cache, { ttl: '30s' }), (req, res) => {
              res.send(`link=${req.get(name) ?? 'none'}`)
            })
          })
          const attack = await served.get('/p').set(name, value)
          expect(attack.text).toBe(`link=${value}`)
          expect((await served.get('/p')).text).toBe('link=none')
        })
      }
    }

    it('two field lines of X-Forwarded-Prefix are keyed as sent', async () => {
      const served = await h.app((app, cache) => {
        app.get(
          '/p',
          cacheRoute(cache, { ttl: '30s' }),
          (req, res) => void res.send(String(req.get('x-forwarded-prefix'))),
        )
      })
      const attack = await raw(served.port, '/p', { headers: { 'x-forwarded-prefix': '/a' } })
      expect(attack.body.toString()).toBe('/a')
      expect((await raw(served.port, '/p')).body.toString()).toBe('undefined')
    })

    it('req.ip from X-Forwarded-For is per client: a route reflecting it keys on it (key or varyOn), as the docs say', async () => {
      const served = await h.app((app, cache) => {
        app.set('trust proxy', true)
        app.get('/ip', cacheRoute(cache, { ttl: '30s', varyOn: ['x-forwarded-for'] }), (req, res) => {
          res.send(`you are ${req.ip}`)
        })
      })
      expect((await served.get('/ip').set('X-Forwarded-For', '6.6.6.6')).text).toBe('you are 6.6.6.6')
      expect((await served.get('/ip').set('X-Forwarded-For', '10.0.0.1')).text).toBe('you are 10.0.0.1')
    })
  })

  describe('a Host spelled in another case passes by (the key lower-cases it, a handler sees it as sent)', () => {
    it('Host: SHOP.TEST reflected by the handler is never served to a clean request', async () => {
      const served = await h.app((app, cache) => {
        app.get('/p', cacheRoute(cache, { ttl: '30s' }), (req, res) => {
          res.send(`host=${req.get('host')} hostname=${req.hostname}`)
        })
      })
      const attack = await raw(served.port, '/p', { headers: { host: 'SHOP.TEST' } })
      expect(attack.body.toString()).toBe('host=SHOP.TEST hostname=SHOP.TEST')
      expect((await raw(served.port, '/p')).body.toString()).toBe('host=shop.test hostname=shop.test')
    })

    it('a canonical-host redirect answered to Host: SHOP.TEST is not stored for shop.test (a redirect loop for everyone)', async () => {
      const served = await h.app((app, cache) => {
        app.get('/p', cacheRoute(cache, { ttl: '30s' }), (req, res) => {
          if (req.hostname !== 'shop.test') return void res.redirect(301, `http://shop.test${req.originalUrl}`)
          res.send('the page')
        })
      })
      expect((await raw(served.port, '/p', { headers: { host: 'SHOP.TEST' } })).status).toBe(301)
      const clean = await raw(served.port, '/p')
      expect([clean.status, clean.body.toString()]).toEqual([200, 'the page'])
    })

    it('X-Forwarded-Host: SHOP.TEST (trust proxy) with Host: shop.test passes by', async () => {
      const served = await h.app((app, cache) => {
        app.set('trust proxy', true)
        app.get('/p', cacheRoute(cache, { ttl: '30s' }), (req, res) => void res.send(`hostname=${req.hostname}`))
      })
      const attack = await raw(served.port, '/p', { headers: { 'x-forwarded-host': 'SHOP.TEST' } })
      expect(attack.body.toString()).toBe('hostname=SHOP.TEST')
      expect((await raw(served.port, '/p')).body.toString()).toBe('hostname=shop.test')
    })

    it('a lower-case Host is still cached', async () => {
      const served = await h.app((app, cache) => {
        app.get('/p', cacheRoute(cache, { ttl: '30s', xCacheHeader: true }), (_req, res) => void res.send('x'))
      })
      await raw(served.port, '/p')
      expect((await raw(served.port, '/p')).headers['x-cache']).toBe('HIT')
    })
  })

  describe("the leader's own client gets its response, as it would uncached", () => {
    const misbehaving: Record<string, RequestHandler> = {
      'res.json twice': (_req, res) => {
        res.json({ first: true })
        res.json({ second: true })
      },
      'a header set after send': (_req, res) => {
        res.json({ first: true })
        res.set('X-After', '1')
      },
    }
    for (const [what, handler] of Object.entries(misbehaving)) {
      it(`${what}: the leader's client gets the first answer, not a closed connection`, async () => {
        const served = await h.app((app, cache) => {
          app.get('/p', cacheRoute(cache, { ttl: '30s' }), handler)
          app.get('/plain', handler)
        })
        const plain = await raw(served.port, '/plain')
        expect(JSON.parse(plain.body.toString())).toEqual({ first: true })
        const leader = await raw(served.port, '/p')
        expect(leader.status).toBe(200)
        expect(JSON.parse(leader.body.toString())).toEqual({ first: true })
      })
    }
  })

  describe('memory on small writes', () => {
    it('past maxBodyBytes, what was buffered goes out as one write, not one write per chunk', async () => {
      let upstreamWrites = 0
      const countWrites: RequestHandler = (_req, res, next) => {
        const write = res.write
        res.write = function (this: typeof res, ...args: Parameters<typeof write>) {
          upstreamWrites++
          return write.apply(this, args)
        } as typeof write
        next()
      }
      const served = await h.route(
        (_req, res) => {
          res.type('text/plain')
          for (let i = 0; i < 5000; i++) res.write('x')
          res.end()
        },
        { maxBodyBytes: 1000 },
        { before: [countWrites] },
      )
      const res = await raw(served.port, '/r')
      expect(res.body.length).toBe(5000)
      // 1001 bytes buffered when released: one write for them, then the remaining 3999 as sent.
      expect(upstreamWrites).toBeLessThanOrEqual(4000)
    })

    it('a capture of 1-byte writes holds them in few buffers: its budget counts what they really take', async () => {
      const budget = createCaptureBudget(64 * 1024 * 1024)
      const hold = gate()
      let written = false
      const served = await h.route(
        async (_req, res) => {
          for (let i = 0; i < 20_000; i++) res.write('x')
          written = true
          await hold.promise
          res.end()
        },
        { captureBudget: budget },
      )
      const pending = raw(served.port, '/r')
      await until(() => written, 'the handler wrote its 20,000 bytes')
      // Payload plus slab slack, bounded; one Buffer (about 100 bytes of heap) per write before.
      expect(budget.used).toBeGreaterThan(20_000)
      expect(budget.used).toBeLessThan(20_000 + 64 * 1024)
      hold.open()
      expect((await pending).body.length).toBe(20_000)
      expect(budget.used).toBe(0)
    })
  })
})
