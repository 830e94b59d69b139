/**
 * Rule 17 / acceptance 10: with Redis stopped or hanging, every request is answered by
 * the handler: no 5xx caused by the cache, no request hanging.
 */
import express from 'express'
import { afterEach, describe, expect, it } from 'vitest'
import type { Cache } from '../../src/index.js'
import { cacheRoute } from '../../src/express/index.js'
import { BinaryValue } from '../../src/entry.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { serve, testCache, type Served } from './helpers.js'

describe.skipIf(!redisAvailable)('Redis down: fail open', () => {
  let redis: RedisServer | undefined
  let cache: Cache | undefined
  let served: Served | undefined
  let runs = 0
  const errors: unknown[] = []

  afterEach(async () => {
    redis?.resume()
    await served?.close()
    await cache?.close()
    await redis?.stop()
    runs = 0
    errors.length = 0
  })

  async function app(): Promise<Served> {
    redis = await startRedis()
    cache = testCache(redis, { redisTimeout: 200, l1: false, circuitBreaker: { threshold: 2, openFor: '30s' } })
    const application = express()
    const route = cacheRoute(cache, { ttl: '30s', xCacheHeader: true, onError: (error) => errors.push(error) })
    application.get('/r/:id', route, (req, res) => {
      runs++
      res.send(`item ${req.params.id}`)
    })
    application.post('/r/:id', route, (_req, res) => void res.status(204).end())
    served = await serve(application)
    return served
  }

  /** Every request answered 200 by the handler, each within a bound (supertest times out otherwise). */
  async function expectAnswered(server: Served, ids: string[]): Promise<void> {
    const responses = await Promise.all(ids.map((id) => server.get(`/r/${id}`).timeout(8000)))
    for (const [i, res] of responses.entries()) {
      expect(res.status).toBe(200)
      expect(res.text).toBe(`item ${ids[i]}`)
    }
  }

  it('stopped: cold and warm routes are answered by the handler, POSTs too', async () => {
    const server = await app()
    await server.get('/r/warm')
    await redis!.kill()
    await expectAnswered(server, ['warm', 'a', 'b', 'c', 'a', 'b', 'c', 'd', 'e', 'f'])
    for (let i = 0; i < 5; i++) await expectAnswered(server, [`seq${i}`])
    expect((await server.post('/r/a').timeout(8000)).status).toBe(204)
    expect(runs).toBeGreaterThanOrEqual(10)
  })

  it('hanging (SIGSTOP): requests are answered after the command timeout, not stuck', async () => {
    const server = await app()
    await server.get('/r/warm')
    redis!.pause()
    await expectAnswered(server, ['warm', 'x', 'y', 'x', 'z'])
    expect((await server.post('/r/x').timeout(8000)).status).toBe(204)
  })

  it('recovers: once Redis is back, responses are cached again', async () => {
    const server = await app()
    await redis!.kill()
    await expectAnswered(server, ['p'])
    await redis!.restart()
    await cache!.close()
    cache = testCache(redis, { redisTimeout: 200, l1: false })
    // A fresh cache on the restarted server: the first GET stores, the second hits.
    const application = express()
    application.get(
      '/r/:id',
      cacheRoute(cache, { ttl: '30s', xCacheHeader: true }),
      (req, res) => void res.send(`item ${req.params.id}`),
    )
    const again = await serve(application)
    try {
      await again.get('/r/p')
      expect((await again.get('/r/p')).headers['x-cache']).toBe('HIT')
    } finally {
      await again.close()
    }
  })
})

/**
 * A Redis that returns a corrupt entry (another writer, a bad restore, a bit flip in a
 * head that still parses): the route is answered by its handler, never by a 502 from a
 * replay that Node refuses.
 */
describe.skipIf(!redisAvailable)('Redis returns a corrupt entry: fail open', () => {
  let redis: RedisServer | undefined
  const caches: Cache[] = []
  let served: Served | undefined

  afterEach(async () => {
    await served?.close()
    for (const cache of caches.splice(0)) await cache.close()
    await redis?.stop()
    redis = undefined
  })

  const now = Date.now()
  const corruptHeads: Array<[string, unknown]> = [
    ['a status Node refuses', { status: 99999, headers: [], storedAt: now }],
    ['a header value with a newline', { status: 200, headers: [['X-A', 'a\nb']], storedAt: now }],
    ['a header that is not a pair', { status: 200, headers: [7], storedAt: now }],
    [
      'a reason phrase that splits the status line',
      { status: 200, statusMessage: 'OK\r\nX-Evil: 1', headers: [], storedAt: now },
    ],
    ['removedHeaders that is not a list', { status: 200, removedHeaders: 5, headers: [], storedAt: now }],
    [
      'a Set-Cookie (never stored, so never replayed)',
      { status: 200, headers: [['Set-Cookie', 'session=victim']], storedAt: now },
    ],
  ]
  for (const [name, head] of corruptHeads) {
    it(`an entry with ${name} is not replayed; the handler answers`, async () => {
      redis = await startRedis()
      const namespace = `corrupt-${process.pid}-${Math.random().toString(36).slice(2)}`
      const writer = testCache(redis, { namespace })
      const reader = testCache(redis, { namespace, l1: false })
      caches.push(writer, reader)
      await writer.set(
        'url:http://shop.test/r',
        new BinaryValue({ kind: 'response', response: head }, Buffer.from('corrupt')),
        { ttl: 30_000 },
      )
      const errors: unknown[] = []
      const application = express()
      application.get(
        '/r',
        cacheRoute(reader, { ttl: '30s', xCacheHeader: true, onError: (error) => errors.push(error) }),
        (_req, res) => void res.send('fresh'),
      )
      served = await serve(application)
      const res = await served.get('/r').timeout(8000)
      expect(res.status).toBe(200)
      expect(res.text).toBe('fresh')
      expect(res.headers['x-cache']).toBe('BYPASS')
      expect(res.headers['x-evil']).toBeUndefined()
      expect(res.headers['set-cookie']).toBeUndefined()
      expect(errors.length).toBeGreaterThan(0)
    })
  }
})
