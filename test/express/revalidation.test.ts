/**
 * Revalidation instead of refetch (RFC 9111 §4.3) over real HTTP, on Express 5 and 4:
 * the handler runs with the stored validators, and Express's own ETag handling answers 304.
 */
import type { RequestHandler } from 'express'
import { describe, expect, it } from 'vitest'
import { redisAvailable } from '../support/redis.js'
import { sleep, until, useRouteHarness } from './helpers.js'
import { EXPRESS_VERSIONS } from './versions.js'

describe.skipIf(!redisAvailable).each(EXPRESS_VERSIONS)('revalidation ($name)', ({ express }) => {
  const h = useRouteHarness({
    express,
    defaults: { ttl: '30s', xCacheHeader: true, cacheStatus: 'sg', honorCacheControl: true },
  })
  let conditionalRuns = 0
  let version = 0
  /** Sends `cacheControl` and a body that stays the same (so Express's ETag matches), counting conditional runs. */
  const handler =
    (cacheControl: string, fail = () => false): RequestHandler =>
    (req, res) => {
      if (req.get('if-none-match') !== undefined) conditionalRuns++
      if (fail()) return void res.status(500).send('origin down')
      res.set({ 'Cache-Control': cacheControl, 'X-Version': String(++version) })
      res.send('the same body')
    }
  const reset = () => {
    conditionalRuns = 0
    version = 0
  }

  for (const cacheControl of ['no-cache', 'public, max-age=0', 'max-age=0, must-revalidate']) {
    it(`${cacheControl} with an ETag is stored and revalidated before every reuse; a 304 refreshes it`, async () => {
      reset()
      const served = await h.route(handler(cacheControl))
      const miss = await served.get('/r')
      expect([miss.status, miss.headers['x-cache']]).toEqual([200, 'MISS'])
      await sleep(50) // past the core's 1 ms freshness (within it, the request passes by: detail=must-revalidate)
      const second = await served.get('/r')
      expect([second.status, second.text, second.headers['x-cache']]).toEqual([200, 'the same body', 'REVALIDATED'])
      expect(second.headers['cache-status']).toBe('sg; fwd=stale; fwd-status=304; stored')
      expect(second.headers['x-version']).toBe('2') // the 304's headers updated the stored response
      expect(second.headers['content-type']).toMatch(/^text\/html/) // kept from the stored one
      expect(conditionalRuns).toBe(1)
    })
  }

  it('a client validator is still answered 304 by the cache after a revalidation', async () => {
    reset()
    const served = await h.route(handler('no-cache'))
    const miss = await served.get('/r')
    await sleep(50)
    const conditional = await served.get('/r').set('If-None-Match', String(miss.headers.etag))
    expect(conditional.status).toBe(304)
    expect(conditionalRuns).toBe(1)
  })

  it('must-revalidate: never served stale, even with staleTtl and staleIfError; a failed revalidation answers the error', async () => {
    reset()
    let down = false
    const served = await h.route(
      handler('max-age=1, must-revalidate', () => down),
      {
        staleTtl: '30s',
        staleIfError: '30s',
      },
    )
    await served.get('/r')
    await sleep(1_200)
    down = true
    const failed = await served.get('/r')
    expect([failed.status, failed.text]).toEqual([500, 'origin down'])
    expect(failed.headers['x-cache']).not.toBe('STALE')
    down = false
    // The core's fail-safe backoff holds the stale entry a moment without loading: the
    // request runs its handler uncached (BYPASS) rather than getting the stale response.
    const again = await served.get('/r')
    expect([again.status, again.text]).toEqual([200, 'the same body'])
    expect(['REVALIDATED', 'BYPASS']).toContain(again.headers['x-cache'])
  })

  it('a grace (stale-while-revalidate) refresh revalidates too: one conditional run, then fresh hits', async () => {
    reset()
    const served = await h.route(handler('max-age=1'), { staleTtl: '30s' })
    await served.get('/r')
    await sleep(1_200)
    expect((await served.get('/r')).headers['x-cache']).toBe('STALE')
    await until(() => conditionalRuns === 1, 'the background revalidation')
    await until(async () => (await served.get('/r')).headers['x-cache'] === 'HIT', 'the refreshed entry')
    expect(h.runs()).toBe(2)
  })

  it('without a validator, no-cache is still not stored (nothing to revalidate with)', async () => {
    const served = await h.route((_req, res) => void res.set('Cache-Control', 'no-cache').send('x'), { etag: false })
    expect((await served.get('/r')).headers['cache-status']).toBe('sg; fwd=uri-miss; detail=no-cache')
    expect((await served.get('/r')).headers['cache-status']).toBe('sg; fwd=uri-miss; detail=no-cache')
  })
})
