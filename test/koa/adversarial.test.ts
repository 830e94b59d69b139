/**
 * The Koa middleware attacked: bad options refused at startup, Redis stopped mid-life
 * (every request still answered by the downstream), a HEAD on a cold URL (run as GET,
 * stored for the GET), a client that goes away while the downstream runs, a URL
 * rewritten above the cache (passes by: it is not the request line's URL), and an HTTP
 * error thrown by the downstream (`ctx.throw(404)`: an answer, not a failure).
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import Koa from 'koa'
import { afterEach, describe, expect, it } from 'vitest'
import { InvalidArgumentError, type Cache } from '../../src/index.js'
import { cacheRoute, type KoaCacheRouteOptions } from '../../src/koa/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { gate, sleep, until } from '../support/timing.js'
import { raw, testCache } from '../express/helpers.js'

describe('Koa cacheRoute options', () => {
  it('refuses bad options when the middleware is made, naming the option', () => {
    const cache = testCache(undefined)
    expect(() => cacheRoute(cache, {} as KoaCacheRouteOptions)).toThrow(/cacheRoute\.ttl/)
    expect(() => cacheRoute(cache, { ttl: 'soon' })).toThrow(InvalidArgumentError)
    expect(() => cacheRoute(cache, { ttl: '1s', statuses: [503] })).toThrow(/cacheRoute\.statuses/)
    expect(() => cacheRoute(cache, { ttl: '1s', nope: 1 } as KoaCacheRouteOptions)).toThrow(/cacheRoute\.nope/)
    void cache.close()
  })
})

describe.skipIf(!redisAvailable)('Koa cacheRoute under attack', () => {
  let redis: RedisServer | undefined
  let cache: Cache | undefined
  let server: http.Server | undefined
  let runs = 0

  afterEach(async () => {
    server?.closeAllConnections()
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
    await cache?.close()
    await redis?.stop()
    server = cache = redis = undefined
    runs = 0
  })

  async function app(
    downstream: (ctx: Koa.Context) => unknown,
    above?: Koa.Middleware,
    options: Partial<KoaCacheRouteOptions> = {},
  ) {
    redis = await startRedis()
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

  it("Redis stopped: every request gets the downstream's response (coalesced within the process at most)", async () => {
    const port = await app((ctx) => (ctx.body = { ok: true }))
    expect((await raw(port, '/r')).headers['x-cache']).toBe('MISS')
    await redis!.stop()
    const answers = await Promise.all(Array.from({ length: 4 }, () => raw(port, '/other')))
    expect(answers.map((a) => [a.status, a.body.toString()])).toEqual(Array(4).fill([200, '{"ok":true}']))
    // The cache falls back to this process alone: concurrent requests may share one run.
    expect(runs).toBeGreaterThanOrEqual(2)
    expect(runs).toBeLessThanOrEqual(5)
  })

  it('a HEAD on a cold URL runs the downstream as GET and stores it for the GET', async () => {
    const methods: string[] = []
    const port = await app((ctx) => {
      methods.push(ctx.method)
      ctx.body = 'whole body'
    })
    const head = await raw(port, '/h', { method: 'HEAD' })
    expect([head.status, head.body.length, head.headers['content-length']]).toEqual([200, 0, '10'])
    const get = await raw(port, '/h')
    expect([get.headers['x-cache'], get.body.toString()]).toEqual(['HIT', 'whole body'])
    expect(methods).toEqual(['GET'])
  })

  it('a client that goes away while the downstream runs does not strand the next request', async () => {
    const release = gate()
    const port = await app(async (ctx) => {
      if (runs === 1) await release.promise
      ctx.body = 'late'
    })
    const request = http.get({ host: '127.0.0.1', port, path: '/gone', headers: { host: 'shop.test' } })
    request.on('error', () => {})
    await until(() => runs === 1, 'the leader to start')
    request.destroy()
    release.open()
    const next = await raw(port, '/gone')
    expect([next.status, next.body.toString()]).toEqual([200, 'late'])
  })

  it('a URL rewritten above the cache passes by, uncached', async () => {
    const port = await app(
      (ctx) => (ctx.body = `page for ${ctx.url}`),
      async (ctx, next) => {
        if (ctx.get('x-original-url')) ctx.url = ctx.get('x-original-url')
        await next()
      },
    )
    const rewritten = await raw(port, '/public', { headers: { 'x-original-url': '/admin' } })
    expect([rewritten.headers['x-cache'], rewritten.body.toString()]).toEqual(['BYPASS', 'page for /admin'])
    const clean = await raw(port, '/public')
    expect([clean.headers['x-cache'], clean.body.toString()]).toEqual(['MISS', 'page for /public'])
  })

  it('ctx.throw(404) once the product is gone: Koa answers 404, never the stale 200 (stale-if-error is for failures)', async () => {
    let gone = false
    const port = await app(
      (ctx) => {
        if (gone) ctx.throw(404, 'no such product')
        ctx.body = 'product 7'
      },
      undefined,
      { ttl: '1s', staleIfError: '1m' },
    )
    expect((await raw(port, '/p/7')).body.toString()).toBe('product 7')
    expect((await raw(port, '/p/7')).headers['x-cache']).toBe('HIT') // stored (or collapsed into its commit)
    gone = true
    await sleep(1100) // past ttl: the stored 200 is stale, kept for staleIfError
    const answers = [await raw(port, '/p/7'), await raw(port, '/p/7')]
    expect(answers.map((a) => [a.status, a.body.toString()])).toEqual([
      [404, 'no such product'],
      [404, 'no such product'],
    ])
    expect(runs).toBe(3)
  })
})
