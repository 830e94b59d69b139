/**
 * The Fastify plugin attacked where Fastify differs from the other frameworks: its
 * lifecycle hooks. Authentication lives in route-level or global `onRequest`,
 * `preValidation` and `preHandler` hooks (@fastify/jwt, @fastify/auth); a response stored
 * for a request they let through must never reach one they would refuse.
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { Cache } from '../../src/index.js'
import { fastifyCache } from '../../src/fastify/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { raw, testCache } from '../express/helpers.js'

/** An API-key check as an app writes one: 401 unless the request carries the key. */
async function requireKey(request: FastifyRequest, reply: FastifyReply) {
  if (request.headers['x-api-key'] !== 'good') return reply.code(401).send('who are you?')
}

describe.skipIf(!redisAvailable)('Fastify plugin under attack', () => {
  let redis: RedisServer
  let cache: Cache | undefined
  let app: FastifyInstance | undefined
  let runs = 0

  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis.stop()
  })
  afterEach(async () => {
    await app?.close()
    await cache?.close()
    app = cache = undefined
    runs = 0
  })

  async function serve(register: (fastify: FastifyInstance) => void): Promise<number> {
    cache = testCache(redis)
    app = Fastify()
    await app.register(fastifyCache, { cache })
    register(app)
    await app.listen({ port: 0, host: '127.0.0.1' })
    return (app.server.address() as { port: number }).port
  }

  const secret = async () => {
    runs++
    return 'the secret report'
  }
  const cached = { cache: { ttl: '30s', xCacheHeader: true } }

  for (const hook of ['onRequest', 'preValidation', 'preHandler'] as const) {
    it(`a route's own ${hook} hook that refuses a request runs before every hit`, async () => {
      const port = await serve((fastify) => fastify.get('/report', { config: cached, [hook]: requireKey }, secret))
      const allowed = await raw(port, '/report', { headers: { 'x-api-key': 'good' } })
      expect([allowed.status, allowed.headers['x-cache']]).toEqual([200, 'MISS'])
      const refused = await raw(port, '/report', { headers: { 'x-api-key': 'stolen' } })
      expect([refused.status, refused.body.toString()]).toEqual([401, 'who are you?'])
      const again = await raw(port, '/report', { headers: { 'x-api-key': 'good' } })
      expect([again.status, again.headers['x-cache'], again.body.toString()]).toEqual([200, 'HIT', 'the secret report'])
      expect(runs).toBe(1)
    })
  }

  it('a global preHandler hook added after the plugin still guards cached routes', async () => {
    const port = await serve((fastify) => {
      fastify.addHook('preHandler', requireKey)
      fastify.get('/report', { config: cached }, secret)
    })
    expect((await raw(port, '/report', { headers: { 'x-api-key': 'good' } })).headers['x-cache']).toBe('MISS')
    const refused = await raw(port, '/report')
    expect([refused.status, refused.body.toString()]).toEqual([401, 'who are you?'])
    expect(runs).toBe(1)
  })

  it('a request refused on a cold URL stores nothing: the next allowed one runs the handler', async () => {
    const port = await serve((fastify) => fastify.get('/report', { config: cached, preHandler: requireKey }, secret))
    expect((await raw(port, '/report')).status).toBe(401)
    const allowed = await raw(port, '/report', { headers: { 'x-api-key': 'good' } })
    expect([allowed.status, allowed.headers['x-cache']]).toEqual([200, 'MISS'])
    expect(runs).toBe(1)
  })
})
