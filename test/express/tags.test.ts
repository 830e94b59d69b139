import express, { type Express } from 'express'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { cacheRoute } from '../../src/express/index.js'
import { createCache, InvalidArgumentError, type Cache } from '../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { serve, until, type Served } from './helpers.js'

/** The "database": products, each in a category. */
interface Product {
  name: string
  category: number
}

describe.skipIf(!redisAvailable)('cacheRoute tags', () => {
  let redis: RedisServer
  const closers: (() => Promise<void>)[] = []
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close()
    await redis.client().flushall()
  })

  /** One app instance: its own cache (and L1) on the shared Redis, the same namespace as the others. */
  async function instance(db: Map<number, Product>, runs: Map<string, number>): Promise<{ cache: Cache; app: Served }> {
    const cache = createCache({ redis: redis.client(), ttl: '1m', namespace: 'shop' })
    await cache.ready()
    const app: Express = express()
    const count = (what: string) => runs.set(what, (runs.get(what) ?? 0) + 1)
    const productIds = (category: number) =>
      [...db].filter(([, product]) => product.category === category).map(([id]) => id)
    app.get(
      '/products/:id',
      cacheRoute(cache, { ttl: '1m', tags: (req) => [`product:${req.params.id}`] }),
      (req, res) => {
        count(`product ${req.params.id}`)
        res.json(db.get(Number(req.params.id)) ?? null)
      },
    )
    // A listing carries the tag of every product it shows, and one for all listings.
    app.get(
      '/categories/:c',
      cacheRoute(cache, {
        ttl: '1m',
        tags: (req) => ['listings', ...productIds(Number(req.params.c)).map((id) => `product:${id}`)],
      }),
      (req, res) => {
        count(`category ${req.params.c}`)
        res.json(productIds(Number(req.params.c)).map((id) => db.get(id)!.name))
      },
    )
    app.get('/about', cacheRoute(cache, { ttl: '1m', tags: ['static'] }), (_req, res) => {
      count('about')
      res.send('about us')
    })
    app.put('/products/:id', express.json(), async (req, res) => {
      db.set(Number(req.params.id), req.body as Product)
      await cache.deleteByTag(`product:${req.params.id}`)
      res.sendStatus(204)
    })
    const served = await serve(app)
    closers.push(async () => {
      await served.close()
      await cache.close()
    })
    return { cache, app: served }
  }

  it('a PUT that calls deleteByTag drops the product and every listing showing it, in every instance', async () => {
    const db = new Map<number, Product>([
      [1, { name: 'tea', category: 7 }],
      [2, { name: 'mug', category: 7 }],
      [3, { name: 'pen', category: 8 }],
    ])
    const runs = new Map<string, number>()
    const [a, b] = [await instance(db, runs), await instance(db, runs)]
    const pages = ['/products/1', '/products/2', '/categories/7', '/categories/8', '/about']
    for (const { app } of [a, b]) for (const page of pages) await app.get(page).expect(200)
    expect(Object.fromEntries(runs)).toEqual({
      'product 1': 1,
      'product 2': 1,
      'category 7': 1,
      'category 8': 1,
      about: 1,
    })

    await a.app.call('put', '/products/1').send({ name: 'green tea', category: 7 }).expect(204)
    // b hears of it over pub/sub: wait until a marker published after the invalidation has reached it.
    const heard = b.cache.stats()['tag-invalidated']
    await redis.client().publish('shop:__tag_invalidations', 'test|marker')
    await until(() => b.cache.stats()['tag-invalidated'] >= heard + 1, 'the marker to reach b')

    for (const { app } of [b, a]) {
      expect((await app.get('/products/1').expect(200)).body).toEqual({ name: 'green tea', category: 7 })
      expect((await app.get('/categories/7').expect(200)).body).toEqual(['green tea', 'mug'])
      expect((await app.get('/products/2').expect(200)).body).toEqual({ name: 'mug', category: 7 })
      expect((await app.get('/categories/8').expect(200)).body).toEqual(['pen'])
    }
    // Each dropped page ran its handler once more, in one instance; the others not at all.
    expect(Object.fromEntries(runs)).toEqual({
      'product 1': 2,
      'product 2': 1,
      'category 7': 2,
      'category 8': 1,
      about: 1,
    })

    await b.cache.deleteByTag('listings')
    expect((await b.app.get('/categories/8').expect(200)).body).toEqual(['pen'])
    expect(runs.get('category 8')).toBe(2)
    expect(runs.get('product 2')).toBe(1)
  })

  it('a tags function that throws or returns bad tags fails the request open and is reported; bad fixed tags fail at startup', async () => {
    const cache = createCache({ redis: redis.client(), ttl: '1m' })
    closers.push(() => cache.close())
    expect(() => cacheRoute(cache, { ttl: '1m', tags: [''] })).toThrow(InvalidArgumentError)
    try {
      cacheRoute(cache, { ttl: '1m', tags: 'product:1' as unknown as string[] })
    } catch (error) {
      expect((error as InvalidArgumentError).argument).toBe('cacheRoute.tags')
    }
    const errors: unknown[] = []
    let runs = 0
    const app = express()
    app.get(
      '/throws',
      cacheRoute(cache, {
        ttl: '1m',
        tags: () => {
          throw new Error('no tags today')
        },
        onError: (error) => errors.push(error),
      }),
      (_req, res) => res.send(`run ${++runs}`),
    )
    app.get(
      '/bad',
      cacheRoute(cache, { ttl: '1m', tags: () => [42 as unknown as string], onError: (error) => errors.push(error) }),
      (_req, res) => res.send(`run ${++runs}`),
    )
    const served = await serve(app)
    closers.push(() => served.close())
    expect((await served.get('/throws').expect(200)).text).toBe('run 1')
    expect((await served.get('/throws').expect(200)).text).toBe('run 2') // uncached
    expect((await served.get('/bad').expect(200)).text).toBe('run 3')
    expect(errors).toHaveLength(3)
    expect((errors[2] as InvalidArgumentError).argument).toBe('cacheRoute.tags')
  })
})
