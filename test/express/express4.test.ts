/**
 * The middleware on Express 4 (installed as the `express4` alias): the main paths (store and
 * replay, conditional GET, HEAD from the GET entry, POST invalidation, uncacheable responses,
 * a throwing handler reaching Express's error handler) behave as on Express 5.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { NextFunction, Request, Response } from 'express'
import express4 from 'express4'
import request from 'supertest'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Cache } from '../../src/index.js'
import { cacheRoute } from '../../src/express/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { HOST, testCache } from './helpers.js'

describe.skipIf(!redisAvailable)('Express 4', () => {
  let redis: RedisServer
  let cache: Cache
  let server: http.Server
  let agent: ReturnType<typeof request>
  let runs = 0
  let price = 100

  beforeAll(async () => {
    redis = await startRedis()
    cache = testCache(redis)
    const app = express4()
    app.all(
      '/products/:id',
      cacheRoute(cache, { ttl: '30s', xCacheHeader: true, etag: 'strong' }),
      (req: Request, res: Response) => {
        runs++
        if (req.method === 'PUT') {
          price++
          res.status(204).json({})
          return
        }
        res.json({ id: 1, price })
      },
    )
    app.get('/private', cacheRoute(cache, { ttl: '30s', xCacheHeader: true }), (_req: Request, res: Response) => {
      runs++
      res.set('Cache-Control', 'private')
      res.send('mine')
    })
    app.get('/boom', cacheRoute(cache, { ttl: '30s' }), () => {
      throw new Error('handler failed')
    })
    app.use((error: Error, _req: Request, res: Response, _next: NextFunction) => {
      res.status(500).send(`handled: ${error.message}`)
    })
    server = http.createServer(app)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    agent = request(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  })
  afterAll(async () => {
    await new Promise<void>((resolve) => server?.close(() => resolve()))
    await cache?.close()
    await redis?.stop()
  })

  it('stores, replays byte for byte, answers If-None-Match and HEAD, and a PUT invalidates', async () => {
    const first = await agent.get('/products/1').set('Host', HOST)
    const second = await agent.get('/products/1').set('Host', HOST)
    expect([first.status, second.status]).toEqual([200, 200])
    expect(first.headers['x-cache']).toBe('MISS')
    expect(second.headers['x-cache']).toBe('HIT')
    expect(second.text).toBe(first.text)
    expect(second.headers['content-type']).toBe(first.headers['content-type'])
    expect(runs).toBe(1)

    const etag = second.headers.etag as string
    expect(etag).toMatch(/^"/)
    const notModified = await agent.get('/products/1').set('Host', HOST).set('If-None-Match', `W/${etag}, "other"`)
    expect(notModified.status).toBe(304)
    expect(notModified.headers.etag).toBe(etag)

    const head = await agent.head('/products/1').set('Host', HOST)
    expect(head.status).toBe(200)
    expect(head.headers['x-cache']).toBe('HIT')
    expect(runs).toBe(1)

    expect((await agent.put('/products/1').set('Host', HOST)).status).toBe(204)
    const after = await agent.get('/products/1').set('Host', HOST)
    expect(after.headers['x-cache']).toBe('MISS')
    expect(after.body).toEqual({ id: 1, price: 101 })
  })

  it('does not store a private response', async () => {
    runs = 0
    const a = await agent.get('/private').set('Host', HOST)
    const b = await agent.get('/private').set('Host', HOST)
    expect([a.text, b.text]).toEqual(['mine', 'mine'])
    expect(b.headers['x-cache']).not.toBe('HIT')
    expect(runs).toBe(2)
  })

  it('a throwing handler reaches the Express error handler', async () => {
    const res = await agent.get('/boom').set('Host', HOST)
    expect(res.status).toBe(500)
    expect(res.text).toBe('handled: handler failed')
  })
})
