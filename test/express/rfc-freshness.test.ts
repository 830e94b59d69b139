/**
 * RFC 9111 freshness over real HTTP, on Express 5 and 4: Age (§4.2.3, §5.1) and invalid
 * freshness information (§4.2.1, RFC 9110 §5.6.7).
 */
import type { RequestHandler } from 'express'
import { describe, expect, it } from 'vitest'
import { redisAvailable } from '../support/redis.js'
import { sleep, useRouteHarness } from './helpers.js'
import { EXPRESS_VERSIONS } from './versions.js'

/** A handler sending these headers and a body counting its runs. */
function sending(headers: Record<string, string>): RequestHandler {
  let runs = 0
  return (_req, res) => {
    res.set(headers)
    res.send(`run ${++runs}`)
  }
}

describe.skipIf(!redisAvailable).each(EXPRESS_VERSIONS)('RFC 9111 freshness ($name)', ({ express }) => {
  const h = useRouteHarness({ express, defaults: { ttl: '30s', xCacheHeader: true, honorCacheControl: true } })

  describe('Age', () => {
    it('max-age=3600 with Age: 7200 is stale on arrival: not served from the cache', async () => {
      const served = await h.route(sending({ 'Cache-Control': 'max-age=3600', Age: '7200' }))
      await served.get('/r')
      const second = await served.get('/r')
      expect(second.text).toBe('run 2')
      expect(h.runs()).toBe(2)
    })

    it("a hit's Age is the response's age (its Age when stored plus its time here), not the seconds since storing", async () => {
      const served = await h.route(sending({ 'Cache-Control': 'max-age=3600', Age: '30' }))
      const miss = await served.get('/r')
      expect(miss.headers['x-cache']).toBe('MISS')
      expect(miss.headers.age).toBe('30') // the handler's own Age is kept on a miss
      const hit = await served.get('/r')
      expect(hit.headers['x-cache']).toBe('HIT')
      expect(Number(hit.headers.age)).toBeGreaterThanOrEqual(30)
      expect(Number(hit.headers.age)).toBeLessThan(40)
    })

    it('the age already spent shortens freshness: max-age=3 with Age: 2 is stale after about 1 s', async () => {
      const served = await h.route(sending({ 'Cache-Control': 'max-age=3', Age: '2' }))
      await served.get('/r')
      await sleep(1_500)
      expect((await served.get('/r')).text).toBe('run 2')
    })

    it('an Age past 2^31 is read and sent on as 2147483648 (RFC 9111 §1.2.2), never as a float; stale on arrival', async () => {
      const served = await h.route(sending({ 'Cache-Control': 'max-age=3600', Age: '99999999999999999999' }))
      const miss = await served.get('/r')
      expect(miss.headers.age).toBe('2147483648') // was '99999999999999980000'
      const second = await served.get('/r')
      expect(second.headers['x-cache']).not.toBe('HIT')
      // From the cache (revalidated) it is the cap; a request passed by (inside the stored copy's
      // first millisecond, on a loaded machine) gets the handler's own field as sent. Never the float.
      expect(['2147483648', '99999999999999999999']).toContain(second.headers.age)
    })

    it('an invalid Age (abc, -1) is ignored and a list is read by its first member', async () => {
      const served = await h.route((req, res) => {
        res.set({ 'Cache-Control': 'max-age=3600', Age: String(req.query.age) }).send('x')
      })
      for (const [age, replayed] of [
        ['abc', '0'],
        ['-1', '0'],
        ['100, 5', '100'],
      ]) {
        const path = `/r?age=${encodeURIComponent(age!)}`
        await served.get(path)
        const hit = await served.get(path)
        expect([age, hit.headers['x-cache'], hit.headers.age]).toEqual([age, 'HIT', replayed])
      }
    })

    it('a response without Age still gets no Age on its miss, and Age: 0 on a hit', async () => {
      const served = await h.route(sending({ 'Cache-Control': 'max-age=60' }))
      expect((await served.get('/r')).headers.age).toBeUndefined()
      expect((await served.get('/r')).headers.age).toBe('0')
    })
  })

  describe('invalid freshness information is stale', () => {
    for (const value of [
      'max-age=-1',
      'max-age=abc',
      'max-age=1.5',
      "max-age='60'",
      'max-age= 60',
      's-maxage=x, max-age=60',
    ]) {
      it(`${value}: not served from the cache, although the route ttl is 30 s`, async () => {
        const served = await h.route(sending({ 'Cache-Control': value }))
        await served.get('/r')
        expect((await served.get('/r')).text).toBe('run 2')
      })
    }

    it('the quoted form max-age="60" is valid and stored', async () => {
      const served = await h.route(sending({ 'Cache-Control': 'max-age="60"' }))
      await served.get('/r')
      expect((await served.get('/r')).headers['x-cache']).toBe('HIT')
    })

    it('max-age =0 is not a max-age directive (no whitespace around "="): the route ttl applies', async () => {
      const served = await h.route(sending({ 'Cache-Control': 'max-age =0' }))
      await served.get('/r')
      expect((await served.get('/r')).headers['x-cache']).toBe('HIT')
    })

    it('an RFC 850 Expires with year 50 is 2050 (the 50-year rule), so fresh, not 1950', async () => {
      const served = await h.route(sending({ Expires: 'Thursday, 18-Aug-50 08:49:37 GMT' }))
      await served.get('/r')
      expect((await served.get('/r')).headers['x-cache']).toBe('HIT')
    })
  })
})
