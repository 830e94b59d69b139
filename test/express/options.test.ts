/**
 * Route options fail fast at cacheRoute() time, naming the option; and the middleware
 * works without Redis (in-process mode: L1 plus single-flight).
 */
import express from 'express'
import { afterEach, describe, expect, it } from 'vitest'
import { cacheRoute, DEFAULT_STATUSES } from '../../src/express/index.js'
import { createCache, type Cache } from '../../src/index.js'
import { gate, serve, until, type Served } from './helpers.js'

describe('cacheRoute options', () => {
  const cache = createCache({ ttl: '1s' })

  it('requires ttl and rejects unknown options by name', () => {
    expect(() => cacheRoute(cache, {} as never)).toThrow(/cacheRoute\.ttl: is required/)
    expect(() => cacheRoute(cache, { ttl: '1s', tll: 5 } as never)).toThrow(/cacheRoute\.tll: unknown option/)
  })

  it('validates every option at startup, including those passed to the core', () => {
    const bad: Array<[object, RegExp]> = [
      [{ ttl: 'soon' }, /cacheRoute\.ttl/],
      [{ ttl: '1s', staleTtl: -1 }, /cacheRoute\.staleTtl/],
      [{ ttl: '1s', etag: 'weak' }, /cacheRoute\.etag/],
      [{ ttl: '1s', maxBodyBytes: -1 }, /cacheRoute\.maxBodyBytes/],
      [{ ttl: '1s', key: 'url' }, /cacheRoute\.key/],
      [{ ttl: '1s', hitForMiss: 'often' }, /cacheRoute\.hitForMiss/],
      [{ ttl: '1s', waitTimeout: 'never' }, /waitTimeout/],
      [{ ttl: '1s', onWaitTimeout: 'panic' }, /onWaitTimeout/],
      [{ ttl: '1s', cacheStatus: '' }, /cacheRoute\.cacheStatus/],
      [{ ttl: '1s', cacheStatus: 'bad\nname' }, /cacheRoute\.cacheStatus/],
      [{ ttl: '1s', targetedCacheControl: 'Bad Field' }, /cacheRoute\.targetedCacheControl/],
      [{ ttl: '1s', targetedCacheControl: 'Cache-Control' }, /cacheRoute\.targetedCacheControl/],
      [{ ttl: '1s', maxVariantsPerUrl: 0 }, /cacheRoute\.maxVariantsPerUrl/],
      [{ ttl: '1s', maxVariantsPerUrl: 1.5 }, /cacheRoute\.maxVariantsPerUrl/],
      [{ ttl: '1s', revalidateTtl: 'later' }, /cacheRoute\.revalidateTtl/],
    ]
    for (const [options, message] of bad)
      expect(() => cacheRoute(cache, options as never), JSON.stringify(options)).toThrow(message)
  })

  it('defaults statuses to the heuristically cacheable set of RFC 9110 §15.1', () => {
    expect(DEFAULT_STATUSES).toEqual([200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501])
  })
})

describe('without Redis (in-process mode)', () => {
  let cache: Cache | undefined
  let served: Served | undefined

  afterEach(async () => {
    await served?.close()
    await cache?.close()
  })

  it('caches, and runs the handler once for concurrent requests', async () => {
    cache = createCache({ ttl: '30s' })
    const hold = gate()
    let runs = 0
    let arrived = 0
    const app = express()
    app.get(
      '/r',
      (_req, _res, next) => (arrived++, next()),
      cacheRoute(cache, { ttl: '30s', xCacheHeader: true }),
      async (_req, res) => {
        runs++
        await hold.promise
        res.send('in process')
      },
    )
    served = await serve(app)
    const pending = Promise.all(Array.from({ length: 10 }, () => served!.get('/r')))
    await until(() => arrived === 10, 'all ten requests to arrive') // the handler is held until then
    hold.open()
    const responses = await pending
    expect(responses.every((r) => r.status === 200 && r.text === 'in process')).toBe(true)
    expect(runs).toBe(1)
    expect((await served.get('/r')).headers['x-cache']).toBe('HIT')
  })
})
