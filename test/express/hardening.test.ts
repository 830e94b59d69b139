/**
 * Issue 9: cacheRoute tried as an attacker and as a demanding operator would. Each test
 * is named after the item it guards (9.1 ... 9.10, docs) and failed on the code before
 * the fix. The cross-process items (9.5) are in coalescing.test.ts.
 */
import http from 'node:http'
import net from 'node:net'
import compression from 'compression'
import express, { type Express, type RequestHandler, type Response } from 'express'
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib'
import { afterEach, describe, expect, it } from 'vitest'
import { cacheRoute } from '../../src/express/index.js'
import type { Cache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { gate, HOST, raw, serve, sleep, testCache, until, useRouteHarness, type Served } from './helpers.js'

/** A GET with a body: `Content-Length` framing, or chunked when `chunked`. */
function getWithBody(
  port: number,
  path: string,
  body: string,
  chunked = false,
): Promise<{ status: number; text: string; cache: string | undefined }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { host: HOST, 'content-type': 'application/json' }
    if (chunked) headers['transfer-encoding'] = 'chunked'
    else headers['content-length'] = String(Buffer.byteLength(body))
    const req = http.request({ host: '127.0.0.1', port, path, method: 'GET', headers, agent: false }, (res) => {
      let text = ''
      res.on('data', (chunk) => (text += chunk))
      res.on('end', () =>
        resolve({ status: res.statusCode!, text, cache: res.headers['x-cache'] as string | undefined }),
      )
    })
    req.on('error', reject)
    if (chunked) req.write(body.slice(0, 3))
    req.end(chunked ? body.slice(3) : body)
  })
}

/** One request written by hand, so the request-target can be absolute-form. Resolves with the body. */
function requestLine(port: number, target: string, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () =>
      socket.write(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`),
    )
    let data = ''
    socket.on('data', (chunk) => (data += chunk))
    socket.on('error', reject)
    socket.on('close', () => resolve(data.slice(data.indexOf('\r\n\r\n') + 4)))
  })
}

/** A request whose response may never complete: resolves when its connection ends, however it ends. */
function doomed(port: number, path: string): Promise<{ status?: number; bytes: number; complete: boolean }> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host: HOST }, agent: false }, (res) => {
      let bytes = 0
      res.on('data', (chunk: Buffer) => (bytes += chunk.length))
      res.on('end', () => resolve({ status: res.statusCode!, bytes, complete: res.complete }))
      res.on('error', () => resolve({ status: res.statusCode!, bytes, complete: false }))
      res.on('aborted', () => resolve({ status: res.statusCode!, bytes, complete: false }))
    })
    req.on('error', () => resolve({ bytes: 0, complete: false }))
    req.end()
  })
}

/** Settles with 'late' if `work` takes longer than a bound far above what the claim needs. */
async function within<T>(work: Promise<T>, ms: number): Promise<T | 'late'> {
  return Promise.race([work, sleep(ms).then(() => 'late' as const)])
}

describe.skipIf(!redisAvailable)('issue 9: hardening', () => {
  const { route, runs, redis } = useRouteHarness()

  /** For tests that need an app of their own shape; closed after the test. */
  const own: Array<{ served: Served; cache: Cache }> = []
  afterEach(async () => {
    for (const { served, cache } of own.splice(0)) {
      await served.close()
      await cache.close()
    }
  })
  async function custom(build: (app: Express, cache: Cache) => void): Promise<Served> {
    const cache = testCache(redis())
    const app = express()
    build(app, cache)
    const served = await serve(app)
    own.push({ served, cache })
    return served
  }

  describe('9.1 a GET or HEAD with a body is never stored or served from the cache', () => {
    const echoName: RequestHandler = (req, res) =>
      void res.send(`hello ${(req.body as { name?: string } | undefined)?.name ?? 'world'}`)

    for (const framing of ['content-length', 'chunked'] as const) {
      it(`fat GET (${framing}) behind express.json() cannot poison the URL`, async () => {
        const server = await route(echoName, {}, { before: [express.json()] })
        const attack = await getWithBody(server.port, '/r', '{"name":"<script>evil()</script>"}', framing === 'chunked')
        expect(attack.text).toBe('hello <script>evil()</script>')
        expect(attack.cache).toBe('BYPASS')
        const victim = await server.get('/r')
        expect(victim.text).toBe('hello world')
        expect(victim.headers['x-cache']).toBe('MISS')
        // Nor is a stored response served to a request with a body: its handler answers it.
        expect((await getWithBody(server.port, '/r', '{"name":"bob"}', framing === 'chunked')).text).toBe('hello bob')
        expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
      })
    }
  })

  describe('9.2 a URL rewritten before the router passes by (the key stays the request line)', () => {
    it('an X-Original-URL rewrite cannot store the admin page under a public URL', async () => {
      const server = await custom((app, cache) => {
        app.use((req, _res, next) => {
          const original = req.headers['x-original-url']
          if (typeof original === 'string') req.url = original
          next()
        })
        const cached = cacheRoute(cache, { ttl: '30s', xCacheHeader: true })
        app.get('/admin', cached, (_req, res) => void res.send('admin console'))
        app.get('/public', cached, (_req, res) => void res.send('public page'))
      })
      const attack = await server.get('/public').set('X-Original-URL', '/admin')
      expect(attack.text).toBe('admin console')
      expect(attack.headers['x-cache']).toBe('BYPASS')
      const victim = await server.get('/public')
      expect(victim.text).toBe('public page')
      expect((await server.get('/public')).headers['x-cache']).toBe('HIT')
    })

    for (const position of ['before', 'after'] as const) {
      it(`an SPA history fallback (${position} cacheRoute) cannot store the HTML shell under an API URL`, async () => {
        const server = await custom((app, cache) => {
          const fallback: RequestHandler = (req, _res, next) => {
            if (req.method === 'GET' && req.headers.accept?.includes('text/html') && !req.path.includes('.'))
              req.url = '/index.html'
            next()
          }
          const cached = cacheRoute(cache, { ttl: '30s', xCacheHeader: true })
          if (position === 'before') app.use(fallback, cached)
          else app.use(cached, fallback)
          app.get('/index.html', (_req, res) => void res.type('html').send('<html>app shell</html>'))
          app.get('/api/items', (_req, res) => void res.json([1, 2, 3]))
        })
        const browser = await server.get('/api/items').set('Accept', 'text/html')
        expect(browser.text).toBe('<html>app shell</html>')
        expect(browser.headers['x-cache']).toBe('BYPASS')
        const api = await server.get('/api/items').set('Accept', 'application/json')
        expect(api.headers['content-type']).toMatch(/^application\/json/)
        expect(api.body).toEqual([1, 2, 3])
      })
    }

    it('a router mounted at its own root (/api routed as "/") is not mistaken for a rewrite', async () => {
      const server = await custom((app, cache) => {
        app.use(
          '/api',
          cacheRoute(cache, { ttl: '30s', xCacheHeader: true }),
          (req, res) => void res.send(`api ${req.originalUrl}`),
        )
      })
      for (const url of ['/api', '/api?x=1', '/api/']) {
        expect((await server.get(url)).headers['x-cache'], url).toBe('MISS')
        expect((await server.get(url)).headers['x-cache'], url).toBe('HIT')
      }
    })
  })

  describe('9.3 absolute-form request-targets', () => {
    const echoTarget: RequestHandler = (req, res) => void res.send(`${req.headers.host} ${req.url}`)

    it("Host '127.0.0.1http' + 's://x/coll' and Host '127.0.0.1' + 'https://x/coll' no longer share a key", async () => {
      const server = await route(echoTarget, {}, { path: '/coll' })
      expect(await requestLine(server.port, 's://x/coll', '127.0.0.1http')).toBe('127.0.0.1http s://x/coll')
      expect(await requestLine(server.port, 'https://x/coll', '127.0.0.1')).toBe('127.0.0.1 https://x/coll')
      expect(runs()).toBe(2)
    })

    it('an absolute-form target naming the same scheme and Host is normalised: one entry', async () => {
      const server = await route((_req, res) => void res.send('collection'), {}, { path: '/coll' })
      await server.get('/coll?page=2')
      expect(await requestLine(server.port, `http://${HOST}/coll?page=2`, HOST)).toBe('collection')
      expect(runs()).toBe(1)
    })
  })

  /**
   * The leader's first run breaks its response (`breakIt`, once `release` opens), five
   * waiters have joined its flight by then, and handlerTimeout is 10 minutes: the old code
   * held them that long. Returns the waiters' responses (or 'late'), then the leader's.
   */
  async function brokenLeader(breakIt: (res: Response, release: Promise<void>) => Promise<void>) {
    const release = gate()
    let arrived = 0
    const server = await route(
      async (_req, res) => {
        if (runs() === 1) return breakIt(res, release.promise)
        res.type('text').send(`answered by run ${runs()}`)
      },
      { handlerTimeout: '10m' },
      { before: [(_req, _res, next) => (arrived++, next())] },
    )
    const leader = doomed(server.port, '/r')
    await until(() => runs() === 1, 'the leader to start')
    const waiters = Promise.all(Array.from({ length: 5 }, () => raw(server.port, '/r')))
    await until(() => arrived === 6, 'the waiters to join the flight')
    release.open()
    const answered = await within(waiters, 20_000)
    expect(answered).not.toBe('late')
    expect((answered as Awaited<typeof waiters>).map((r) => [r.status, r.body.toString()])).toEqual(
      Array(5).fill([200, 'answered by run 2']),
    )
    return { server, leader }
  }

  describe('9.4 a handler that writes part of its body and then throws', () => {
    it('releases the waiters at once (not after handlerTimeout); they queue behind a new leader; the partial body is never stored', async () => {
      const { server, leader } = await brokenLeader(async (res, release) => {
        res.type('text').write('partial ')
        await release
        throw new Error('the database went away mid-response') // headers sent: Express destroys the socket
      })
      expect((await leader).complete).toBe(false)
      const next = await raw(server.port, '/r')
      expect([next.headers['x-cache'], next.body.toString()]).toEqual(['HIT', 'answered by run 2'])
      expect(runs()).toBe(2)
    })
  })

  describe('9.6 variant lists', () => {
    it('live no longer than their variants (ttl + grace + staleIfError), not 24 h', async () => {
      const server = await route(
        (_req, res) => void res.type('text').send('compressible '.repeat(100)),
        { ttl: '2s', staleTtl: '3s', staleIfError: 0 },
        {
          path: '/r',
          after: [compression({ threshold: 0 })],
        },
      )
      for (let i = 0; i < 5; i++) await raw(server.port, `/r?junk=${i}`, { headers: { 'accept-encoding': 'gzip' } })
      const client = redis().client()
      try {
        const keys = (await client.keys('*junk=*')).filter((key) => !key.endsWith(':lock') && !key.endsWith(':ch'))
        expect(keys.length).toBeGreaterThanOrEqual(10) // 5 variant lists + 5 variants
        const lives = await Promise.all(keys.map((key) => client.pttl(key)))
        for (const [i, life] of lives.entries()) expect(life, keys[i]).toBeLessThanOrEqual(5_000)
      } finally {
        client.disconnect()
      }
    })
  })

  describe('9.7 a body shorter than its Content-Length', () => {
    it('is never stored; its waiters are released at once and queue behind a new leader', async () => {
      const { server, leader } = await brokenLeader(async (res, release) => {
        res.set('Content-Length', '1000').type('text')
        res.write('0123456789')
        await release
        res.end() // 990 bytes short
      })
      const next = await raw(server.port, '/r')
      expect([next.headers['x-cache'], next.body.toString(), next.headers['content-length']]).toEqual([
        'HIT',
        'answered by run 2',
        '17',
      ])
      expect(runs()).toBe(2)
      await server.close() // the leader's client still waits for the 990 bytes it was promised, as it would uncached
      expect(await leader).toMatchObject({ status: 200, bytes: 10, complete: false })
    })
  })

  describe('9.8 Accept-Encoding', () => {
    /** The q a client gives `coding` (a test oracle, written apart from the code under test). */
    function accepts(header: string | undefined, coding: string): boolean {
      if (header === undefined) return true
      const entries = header
        .split(',')
        .map((part) => part.trim().toLowerCase())
        .filter(Boolean)
        .map((part) => {
          const [name, ...params] = part.split(';').map((p) => p.trim())
          const q = params.find((p) => p.startsWith('q='))
          return [name, q ? Number(q.slice(2)) : 1] as const
        })
      const own = entries.find(([name]) => name === coding)
      if (own) return own[1] > 0
      const star = entries.find(([name]) => name === '*')
      if (star) return star[1] > 0
      return coding === 'identity'
    }

    it('14 spellings of 4 encodings make at most 3 variants, and every client gets a coding it accepts', async () => {
      const text = 'compressible '.repeat(100)
      const server = await route(
        (_req, res) => void res.type('text').send(text),
        {},
        { after: [compression({ threshold: 0 })] },
      )
      const spellings = [
        'gzip, br',
        'br,gzip',
        'GZIP',
        'gzip;q=1.0',
        'br;q=1, gzip;q=0.5',
        'gzip, deflate, br',
        'deflate, gzip',
        'identity',
        'deflate',
        'gzip;q=0, br',
        'br;q=0, gzip',
        '*',
        '',
        undefined,
      ]
      for (const spelling of spellings) {
        const res = await raw(
          server.port,
          '/r',
          spelling === undefined ? {} : { headers: { 'accept-encoding': spelling } },
        )
        const coding = res.headers['content-encoding'] ?? 'identity'
        expect(accepts(spelling, coding), `${spelling} got ${coding}`).toBe(true)
        const decode = {
          gzip: gunzipSync,
          br: brotliDecompressSync,
          deflate: inflateSync,
          identity: (body: Buffer) => body,
        }[coding]!
        const body = decode(res.body)
        expect(body.toString(), String(spelling)).toBe(text)
      }
      expect(runs()).toBeLessThanOrEqual(3)
    })

    it('a client that refuses identity and every coding a variant is made with passes by, its handler seeing what it sent', async () => {
      const server = await route((req, res) => void res.send(`saw ${req.headers['accept-encoding']}`))
      const res = await raw(server.port, '/r', { headers: { 'accept-encoding': 'zstd, identity;q=0' } })
      expect([res.headers['x-cache'], res.body.toString()]).toEqual(['BYPASS', 'saw zstd, identity;q=0'])
    })
  })

  describe("9.10 a response's explicit freshness shortens the route ttl by default", () => {
    const date = () => new Date().toUTCString()
    const lifetimes: Record<string, Record<string, string> | (() => Record<string, string>)> = {
      'max-age=1': { 'Cache-Control': 'max-age=1' },
      's-maxage=1': { 'Cache-Control': 'max-age=60, s-maxage=1' },
      'Expires in 1 s': () => ({ Date: date(), Expires: new Date(Date.now() + 1000).toUTCString() }),
    }

    it('max-age=1, s-maxage=1 or Expires in 1 s end freshness after 1 s, although the route says 30 s', async () => {
      const server = await route(
        (req, res) => {
          const headers = lifetimes[req.query.case as string]!
          res.set(typeof headers === 'function' ? headers() : headers).send(`run ${runs()}`)
        },
        { ttl: '30s' },
      )
      for (const name of Object.keys(lifetimes))
        expect((await server.get(`/r?case=${encodeURIComponent(name)}`)).headers['x-cache']).toBe('MISS')
      await sleep(1500)
      for (const name of Object.keys(lifetimes))
        expect((await server.get(`/r?case=${encodeURIComponent(name)}`)).headers['x-cache'], name).toBe('MISS')
    })

    // Without a validator (etag: false): with one it is stored to be revalidated (revalidation.test.ts).
    for (const stale of ['max-age=0', 'expires-past']) {
      it(`${stale}: not stored at all`, async () => {
        const server = await route(
          (_req, res) => {
            if (stale === 'max-age=0') res.set('Cache-Control', 'max-age=0')
            else res.set('Expires', 'Thu, 01 Jan 2015 00:00:00 GMT')
            res.send('already stale')
          },
          { ttl: '30s', etag: false },
        )
        for (let i = 0; i < 2; i++) expect((await server.get('/r')).headers['x-cache']).toBe('BYPASS')
        expect(runs()).toBe(2)
      })
    }
  })

  describe('docs: request preconditions', () => {
    it('If-Match and If-Unmodified-Since pass by, so the handler evaluates them (412) instead of the cache ignoring them', async () => {
      const LAST_MODIFIED = 'Wed, 01 Jan 2025 00:00:00 GMT'
      const server = await route((req, res) => {
        const ifMatch = req.headers['if-match']
        const since = req.headers['if-unmodified-since']
        if (
          (ifMatch !== undefined && ifMatch !== '"v1"') ||
          (since !== undefined && Date.parse(since) < Date.parse(LAST_MODIFIED))
        )
          return void res.status(412).end()
        res.set({ ETag: '"v1"', 'Last-Modified': LAST_MODIFIED }).send('document v1')
      })
      await server.get('/r')
      expect((await server.get('/r')).headers['x-cache']).toBe('HIT')
      const mismatch = await server.get('/r').set('If-Match', '"v0"')
      expect([mismatch.status, mismatch.headers['x-cache']]).toEqual([412, 'BYPASS'])
      const modified = await server.get('/r').set('If-Unmodified-Since', 'Tue, 01 Jan 2019 00:00:00 GMT')
      expect(modified.status).toBe(412)
      const matching = await server.get('/r').set('If-Match', '"v1"')
      expect([matching.status, matching.text]).toEqual([200, 'document v1'])
    })
  })
})
