/**
 * The Koa middleware over real HTTP against a real redis-server: what the downstream
 * leaves on ctx (a string, a Buffer, an object, a stream) is stored and replayed byte for
 * byte; a burst coalesces onto one downstream run; HEAD, If-None-Match, invalidation by
 * a write, a throwing downstream and a stream past maxBodyBytes.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import Koa from 'koa'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { Cache } from '../../src/index.js'
import { cacheRoute, type KoaCacheRouteOptions } from '../../src/koa/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { gate, sleep, until } from '../support/timing.js'
import { raw, testCache, type RawResponse } from '../express/helpers.js'

type Downstream = (ctx: Koa.Context) => unknown

describe.skipIf(!redisAvailable)('Koa cacheRoute', () => {
  let redis: RedisServer
  let cache: Cache | undefined
  let server: http.Server | undefined
  let runs = 0

  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })
  afterEach(async () => {
    server?.closeAllConnections()
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
    await cache?.close()
    server = undefined
    cache = undefined
    runs = 0
  })

  /** An app: [above] → cacheRoute → downstream (counted); returns the port. */
  async function app(downstream: Downstream, options: Partial<KoaCacheRouteOptions> = {}, above?: Koa.Middleware) {
    cache = testCache(redis)
    const koa = new Koa()
    koa.silent = true
    if (above) koa.use(above)
    koa.use(cacheRoute(cache, { ttl: '30s', xCacheHeader: true, ...options }))
    koa.use(async (ctx) => {
      runs++
      await downstream(ctx)
    })
    server = http.createServer(koa.callback())
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    return (server.address() as AddressInfo).port
  }

  const pair = async (port: number, path = '/r', headers: Record<string, string> = {}) => {
    const first = await raw(port, path, { headers })
    const second = await raw(port, path, { headers })
    return [first, second] as const
  }
  const sameResponse = (a: RawResponse, b: RawResponse) => {
    const strip = (r: RawResponse) => {
      const { date: _date, 'x-cache': _x, age: _age, connection: _c, ...rest } = r.headers
      return rest
    }
    expect(b.status).toBe(a.status)
    expect(strip(b)).toEqual(strip(a))
    expect(b.body.equals(a.body)).toBe(true)
  }

  it.each([
    ['a string (html)', (ctx: Koa.Context) => (ctx.body = '<p>hello</p>'), 'text/html; charset=utf-8'],
    ['a string (text)', (ctx: Koa.Context) => (ctx.body = 'héllo'), 'text/plain; charset=utf-8'],
    ['a Buffer', (ctx: Koa.Context) => (ctx.body = Buffer.from([0, 1, 2, 255])), 'application/octet-stream'],
    ['an object', (ctx: Koa.Context) => (ctx.body = { a: 1, list: ['x'] }), 'application/json; charset=utf-8'],
    [
      'a Node stream',
      (ctx: Koa.Context) => {
        ctx.type = 'text/csv'
        ctx.body = Readable.from([Buffer.from('a,b\n'), Buffer.from('1,2\n')])
      },
      'text/csv; charset=utf-8',
    ],
    [
      'a web ReadableStream',
      (ctx: Koa.Context) => {
        ctx.type = 'text/plain'
        ctx.body = new Response('streamed web body').body
      },
      'text/plain; charset=utf-8',
    ],
  ])('stores %s and replays it byte for byte', async (_name, downstream, type) => {
    const port = await app(downstream)
    const [first, second] = await pair(port)
    expect([first.headers['x-cache'], second.headers['x-cache']]).toEqual(['MISS', 'HIT'])
    expect(first.headers['content-type']).toBe(type)
    expect(Number(second.headers['content-length'])).toBe(second.body.length)
    sameResponse(first, second)
    expect(runs).toBe(1)
  })

  it("keeps the downstream's status, reason phrase and headers; headers set above the cache are set again, not stored", async () => {
    let request = 0
    const port = await app(
      (ctx) => {
        ctx.status = 203
        ctx.message = 'Custom Reason'
        ctx.set('X-Own', 'own')
        ctx.body = 'x'
      },
      {},
      async (ctx, next) => {
        ctx.set('X-Request', String(++request))
        await next()
      },
    )
    const [first, second] = await pair(port)
    expect([first.status, second.status]).toEqual([203, 203])
    expect(second.headers['x-own']).toBe('own')
    expect([first.headers['x-request'], second.headers['x-request']]).toEqual(['1', '2'])
    expect(second.headers['x-cache']).toBe('HIT')
    expect(runs).toBe(1)
  })

  it('a burst of 20 concurrent requests on a cold URL runs the downstream once', async () => {
    const release = gate()
    const port = await app(async (ctx) => {
      await release.promise
      ctx.body = { n: 1 }
    })
    const burst = Array.from({ length: 20 }, () => raw(port, '/cold'))
    await until(() => runs === 1, 'the leader to start')
    release.open()
    const answers = await Promise.all(burst)
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200))
    expect(answers.filter((a) => a.headers['x-cache'] === 'MISS')).toHaveLength(1)
    expect(runs).toBe(1)
  })

  it('HEAD is answered from the GET entry; If-None-Match gets a 304', async () => {
    const port = await app((ctx) => {
      ctx.set('ETag', '"v1"')
      ctx.body = 'entity'
    })
    await raw(port, '/r')
    const head = await raw(port, '/r', { method: 'HEAD' })
    expect(head.status).toBe(200)
    expect(head.headers['content-length']).toBe('6')
    expect(head.body.length).toBe(0)
    expect(head.headers['x-cache']).toBe('HIT')
    const notModified = await raw(port, '/r', { headers: { 'if-none-match': '"v1"' } })
    expect(notModified.status).toBe(304)
    expect(notModified.body.length).toBe(0)
    expect(runs).toBe(1)
  })

  it('a successful POST invalidates the URL', async () => {
    let version = 1
    const port = await app((ctx) => {
      if (ctx.method === 'POST') {
        version++
        ctx.status = 204
        return
      }
      ctx.body = { version }
    })
    expect(JSON.parse((await raw(port, '/r')).body.toString())).toEqual({ version: 1 })
    expect((await raw(port, '/r')).headers['x-cache']).toBe('HIT')
    expect((await raw(port, '/r', { method: 'POST' })).status).toBe(204)
    const after = await raw(port, '/r')
    expect(after.headers['x-cache']).toBe('MISS')
    expect(JSON.parse(after.body.toString())).toEqual({ version: 2 })
  })

  it('a throwing downstream reaches Koa error handling and nothing is stored', async () => {
    let fail = true
    const port = await app((ctx) => {
      if (fail) throw new Error('boom')
      ctx.body = 'ok'
    })
    expect((await raw(port, '/r')).status).toBe(500)
    fail = false
    const next = await raw(port, '/r')
    expect(next.status).toBe(200)
    expect(next.headers['x-cache']).toBe('MISS')
    expect(runs).toBe(2)
  })

  it('a stream past maxBodyBytes reaches its client whole and is not stored', async () => {
    const chunk = Buffer.alloc(4096, 'a')
    const port = await app(
      (ctx) => {
        ctx.type = 'text/plain'
        ctx.body = Readable.from(Array.from({ length: 10 }, () => chunk))
      },
      { maxBodyBytes: 10_000 },
    )
    const [first, second] = await pair(port)
    expect(first.body.length).toBe(40_960)
    expect(second.body.length).toBe(40_960)
    expect(second.headers['x-cache']).not.toBe('HIT')
    expect(runs).toBe(2)
  })

  it('stale-while-revalidate: a stale hit is answered at once, the downstream refreshes it in the background', async () => {
    let version = 0
    const port = await app(
      (ctx) => {
        version++
        ctx.set('X-Version', String(version))
        ctx.body = { version }
      },
      { ttl: 100, staleTtl: '30s', cacheStatus: 'koa' },
      async (ctx, next) => {
        ctx.set('X-Above', 'yes')
        await next()
      },
    )
    expect(JSON.parse((await raw(port, '/swr')).body.toString())).toEqual({ version: 1 })
    await sleep(150)
    const stale = await raw(port, '/swr')
    expect(stale.headers['x-cache']).toBe('STALE')
    expect(stale.headers['x-above'], JSON.stringify(stale.headers)).toBe('yes')
    expect([stale.headers['x-version'], JSON.parse(stale.body.toString())]).toEqual(['1', { version: 1 }])
    await until(() => runs === 2, 'the background refresh')
    await until(async () => (await raw(port, '/swr')).headers['x-version'] === '2', 'the refreshed entry')
    const fresh = await raw(port, '/swr')
    expect(fresh.headers['x-cache']).toBe('HIT')
    expect(JSON.parse(fresh.body.toString())).toEqual({ version: 2 })
    expect(fresh.headers['x-above']).toBe('yes')
    expect(runs).toBe(2)
  })

  it('a private or Set-Cookie response is not stored', async () => {
    const port = await app((ctx) => {
      ctx.set('Cache-Control', 'private')
      ctx.body = 'mine'
    })
    const [first, second] = await pair(port)
    expect([first.headers['x-cache'], second.headers['x-cache']]).toEqual(['BYPASS', 'BYPASS'])
    expect(runs).toBe(2)
  })
})
