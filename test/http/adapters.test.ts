/**
 * What the Fastify and Hono adapters do beyond the shared table (cases.ts): Fastify's
 * `inject`, route config, its own HEAD routes and hooks before the cache; Hono's headers
 * set before the cache and `cacheFetch`; both failing open with Redis down.
 */
import { serve as serveHono } from '@hono/node-server'
import Fastify from 'fastify'
import { Hono, type Context } from 'hono'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { fastifyCache } from '../../src/fastify/index.js'
import { cacheFetch, cacheRoute } from '../../src/hono/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { send, HOST } from './client.js'

describe.skipIf(!redisAvailable)('adapters beyond the table', () => {
  let redis: RedisServer
  let namespaces = 0
  const caches: Cache[] = []
  const newCache = (options: { redis?: RedisServer; l1?: false } = {}) => {
    const client = (options.redis ?? redis).client({ maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    const cache = createCache({
      redis: client,
      namespace: `adapters-${++namespaces}`,
      ttl: '30s',
      redisTimeout: 200,
      circuitBreaker: { threshold: 2, openFor: '30s' },
      ...(options.l1 === false ? { l1: false } : {}),
    })
    caches.push(cache)
    return cache
  }
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await Promise.all(caches.map((cache) => cache.close()))
    await redis?.stop()
  })

  describe('fastify', () => {
    it('works through inject alone (no listen): MISS, HIT, 304, and a POST invalidates', async () => {
      let runs = 0
      const app = Fastify()
      await app.register(fastifyCache, { cache: newCache(), defaults: { xCacheHeader: true } })
      app.route({
        method: ['GET', 'POST'],
        url: '/p',
        config: { cache: { ttl: '30s' } },
        handler: async (_request, reply) => {
          runs++
          return reply.header('etag', '"e1"').send({ run: runs })
        },
      })
      const get = (headers: Record<string, string> = {}) =>
        app.inject({ method: 'GET', url: '/p', headers: { host: HOST, ...headers } })
      const miss = await get()
      const hit = await get()
      const notModified = await get({ 'if-none-match': '"e1"' })
      expect([miss.headers['x-cache'], hit.headers['x-cache'], hit.body]).toEqual(['MISS', 'HIT', '{"run":1}'])
      expect([notModified.statusCode, notModified.body]).toEqual([304, ''])
      await app.inject({ method: 'POST', url: '/p', headers: { host: HOST } })
      expect((await get()).body).toBe('{"run":3}')
      await app.close()
    })

    it('only routes with config.cache are cached; config.cache: true takes the defaults; bad options fail at registration', async () => {
      let runs = 0
      const app = Fastify()
      await app.register(fastifyCache, { cache: newCache(), defaults: { ttl: '30s', xCacheHeader: true } })
      app.get('/plain', async () => ({ run: ++runs }))
      app.get('/cached', { config: { cache: true } }, async () => ({ run: ++runs }))
      await app.ready()
      const plain = [
        await app.inject({ url: '/plain', headers: { host: HOST } }),
        await app.inject({ url: '/plain', headers: { host: HOST } }),
      ]
      expect(plain.map((r) => [r.headers['x-cache'], r.body])).toEqual([
        [undefined, '{"run":1}'],
        [undefined, '{"run":2}'],
      ])
      await app.inject({ url: '/cached', headers: { host: HOST } })
      expect((await app.inject({ url: '/cached', headers: { host: HOST } })).headers['x-cache']).toBe('HIT')
      // Fastify's own HEAD route of a config.cache: true GET is served from the GET entry too.
      const head = await app.inject({ method: 'HEAD', url: '/cached', headers: { host: HOST } })
      expect([head.headers['x-cache'], head.headers['content-length'], head.body]).toEqual(['HIT', '9', ''])
      await app.close()

      const bad = Fastify()
      await bad.register(fastifyCache, { cache: newCache() })
      expect(() => bad.get('/b', { config: { cache: { ttl: 'soon' } } }, async () => 'x')).toThrow(/cacheRoute\.ttl/)
      await expect(Fastify().register(fastifyCache, {} as never)).rejects.toThrow(/register with \{ cache \}/)
    })

    it("a route's own HEAD handler passes by, so it never fills the GET entry", async () => {
      let gets = 0
      const app = Fastify()
      await app.register(fastifyCache, { cache: newCache(), defaults: { ttl: '30s', xCacheHeader: true } })
      app.head('/h', { config: { cache: true } }, async (_request, reply) => reply.header('x-head', 'own').send())
      app.get('/h', { config: { cache: true } }, async () => `page ${++gets}`)
      await app.ready()
      const head = await app.inject({ method: 'HEAD', url: '/h', headers: { host: HOST } })
      expect([head.headers['x-head'], head.headers['x-cache']]).toEqual(['own', 'BYPASS'])
      const get = await app.inject({ url: '/h', headers: { host: HOST } })
      expect([get.headers['x-cache'], get.body]).toEqual(['MISS', 'page 1'])
      await app.close()
    })

    it('headers set by hooks before the cache are per request: a hit carries its own request id, not the stored one', async () => {
      let id = 0
      const app = Fastify()
      await app.register(fastifyCache, { cache: newCache(), defaults: { ttl: '30s', xCacheHeader: true } })
      app.addHook('onRequest', async (_request, reply) => void reply.header('x-request-id', String(++id)))
      app.get('/u', { config: { cache: true } }, async () => 'page')
      await app.ready()
      const first = await app.inject({ url: '/u', headers: { host: HOST } })
      const second = await app.inject({ url: '/u', headers: { host: HOST } })
      expect([first.headers['x-request-id'], second.headers['x-request-id'], second.headers['x-cache']]).toEqual([
        '1',
        '2',
        'HIT',
      ])
      await app.close()
    })

    it('key and tags are functions of the FastifyRequest; deleteByTag evicts the tagged entry', async () => {
      let runs = 0
      const cache = newCache()
      const app = Fastify()
      await app.register(fastifyCache, { cache, defaults: { ttl: '30s', xCacheHeader: true } })
      app.get<{ Params: { id: string } }>(
        '/t/:id',
        { config: { cache: { tags: (request) => [`product:${(request.params as { id: string }).id}`] } } },
        async (request) => `product ${request.params.id}, run ${++runs}`,
      )
      await app.ready()
      const get = () => app.inject({ url: '/t/7', headers: { host: HOST } })
      await get()
      expect((await get()).headers['x-cache']).toBe('HIT')
      await cache.deleteByTag('product:7')
      const after = await get()
      expect([after.headers['x-cache'], after.body]).toEqual(['MISS', 'product 7, run 2'])
      await app.close()
    })

    it('a forged refresh header does not skip the cache', async () => {
      let runs = 0
      const app = Fastify()
      await app.register(fastifyCache, { cache: newCache(), defaults: { ttl: '30s', xCacheHeader: true } })
      app.get('/f', { config: { cache: true } }, async () => `run ${++runs}`)
      await app.ready()
      const forged = { host: HOST, 'x-stampede-guard-refresh': 'guess' }
      await app.inject({ url: '/f', headers: forged })
      const second = await app.inject({ url: '/f', headers: forged })
      expect([second.headers['x-cache'], runs]).toEqual(['HIT', 1])
      await app.close()
    })
  })

  describe('hono', () => {
    it('headers set before the cache (c.header) are per request, not stored', async () => {
      let id = 0
      const app = new Hono()
      app.use(async (c, next) => {
        c.header('x-request-id', String(++id))
        await next()
      })
      app.get('/u', cacheRoute(newCache(), { ttl: '30s', xCacheHeader: true }), (c) => c.text('page'))
      const first = await app.request(`http://${HOST}/u`, { headers: { host: HOST } })
      const second = await app.request(`http://${HOST}/u`, { headers: { host: HOST } })
      expect([first.headers.get('x-request-id'), second.headers.get('x-request-id')]).toEqual(['1', '2'])
      expect([second.headers.get('x-cache'), await second.text()]).toEqual(['HIT', 'page'])
    })

    it('a field the handler sets over one set before the cache replaces it; several Set-Cookie set before all go out', async () => {
      let runs = 0
      const app = new Hono()
      app.use('/h', async (c, next) => {
        c.header('x-frame-options', 'DENY')
        await next()
      })
      app.use('/s', async (c, next) => {
        c.header('set-cookie', 'a=1', { append: true })
        c.header('set-cookie', 'b=2', { append: true })
        await next()
      })
      const cached = cacheRoute(newCache(), { ttl: '30s', xCacheHeader: true })
      app.get('/h', cached, (c) => {
        c.header('x-frame-options', 'SAMEORIGIN')
        return c.text(`framed ${++runs}`)
      })
      app.get('/s', cached, (c) => c.text('with cookies'))
      const get = (path: string) => app.request(`http://${HOST}${path}`, { headers: { host: HOST } })
      const [miss, hit] = [await get('/h'), await get('/h')]
      expect([miss.headers.get('x-cache'), hit.headers.get('x-cache')]).toEqual(['MISS', 'HIT'])
      expect([miss.headers.get('x-frame-options'), hit.headers.get('x-frame-options')]).toEqual([
        'SAMEORIGIN',
        'SAMEORIGIN',
      ])
      expect([await hit.text(), hit.headers.get('content-length')]).toEqual(['framed 1', '8'])
      // A response with Set-Cookie is never stored: each goes out whole, both cookies on it.
      const withCookies = await get('/s')
      expect(withCookies.headers.get('x-cache')).toBe('BYPASS')
      expect(withCookies.headers.getSetCookie()).toEqual(['a=1', 'b=2'])
      expect(await withCookies.text()).toBe('with cookies')
    })

    it('tags are a function of the Hono context; deleteByTag evicts the tagged entry', async () => {
      let runs = 0
      const cache = newCache()
      const app = new Hono()
      const tagged = cacheRoute<Context>(cache, {
        ttl: '30s',
        xCacheHeader: true,
        tags: (c) => [`product:${c.req.param('id')}`],
      })
      app.get('/t/:id', tagged, (c) => c.text(`product ${c.req.param('id')}, run ${++runs}`))
      const get = () => app.request(`http://${HOST}/t/7`, { headers: { host: HOST } })
      await get()
      expect((await get()).headers.get('x-cache')).toBe('HIT')
      await cache.deleteByTag('product:7')
      const after = await get()
      expect([after.headers.get('x-cache'), await after.text()]).toEqual(['MISS', 'product 7, run 2'])
    })

    it('cacheFetch: one handler run for a burst; a handler that throws rejects, as it would uncached', async () => {
      let runs = 0
      const cached = cacheFetch(newCache(), { ttl: '30s' }, async (request) => {
        runs++
        if (new URL(request.url).pathname === '/boom') throw new Error('handler bug')
        await new Promise((resolve) => setTimeout(resolve, 100))
        return new Response('page')
      })
      const bodies = await Promise.all(
        Array.from({ length: 10 }, async () => (await cached(new Request('http://shop.test/p'))).text()),
      )
      expect([bodies, runs]).toEqual([Array(10).fill('page'), 1])
      await expect(cached(new Request('http://shop.test/boom'))).rejects.toThrow('handler bug')
    })
  })

  it('Redis down: fastify and hono requests are answered by their handlers (no 5xx, none hanging)', async () => {
    const dead = await startRedis()
    const cache = newCache({ redis: dead, l1: false }) // else the first answer would be kept in memory
    await dead.stop()
    let runs = 0
    const fastify = Fastify()
    await fastify.register(fastifyCache, { cache, defaults: { ttl: '30s' } })
    fastify.get('/d', { config: { cache: true } }, async () => `fastify ${++runs}`)
    await fastify.listen({ port: 0, host: '127.0.0.1' })
    const hono = new Hono()
    hono.get('/d', cacheRoute(cache, { ttl: '30s' }), (c) => c.text(`hono ${++runs}`))
    const honoServer = serveHono({ fetch: hono.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise((resolve) => honoServer.once('listening', resolve))
    const ports = [(fastify.server.address() as { port: number }).port, (honoServer.address() as { port: number }).port]
    const replies = []
    for (const port of [...ports, ...ports]) replies.push(await send(port, '/d'))
    expect(replies.map((r) => `${r.status} ${r.body.toString()}`)).toEqual([
      '200 fastify 1',
      '200 hono 2',
      '200 fastify 3',
      '200 hono 4',
    ])
    await fastify.close()
    honoServer.close()
  })
})
