/**
 * Rule 13 / acceptance 5: conditional requests against stored responses.
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { CacheRouteOptions } from '../../src/express/index.js'
import { redisAvailable } from '../support/redis.js'
import { raw, useRouteHarness, type Served } from './helpers.js'

const LAST_MODIFIED = 'Wed, 01 Jan 2025 00:00:00 GMT'

describe.skipIf(!redisAvailable)('conditional requests', () => {
  const { route, runs, cache } = useRouteHarness({ method: 'get' })

  function app(options: Partial<CacheRouteOptions> = {}, etag = '"v1"'): Promise<Served> {
    return route((_req, res) => {
      if (etag) res.set('ETag', etag)
      res.set({
        'Last-Modified': LAST_MODIFIED,
        'Cache-Control': 'public, max-age=30',
        Expires: 'Thu, 01 Jan 2037 00:00:00 GMT',
        Vary: 'Accept-Language',
        'Content-Location': '/r',
      })
      res.type('text').send('representation')
    }, options)
  }

  it('If-None-Match yields a 304 carrying ETag, Vary, Cache-Control, Expires, Date (and Age)', async () => {
    const server = await app()
    const full = await server.get('/r')
    const notModified = await server.get('/r').set('If-None-Match', '"v1"')
    expect(notModified.status).toBe(304)
    expect(notModified.text).toBe('')
    for (const name of ['etag', 'vary', 'cache-control', 'expires', 'date', 'content-location']) {
      expect(notModified.headers[name], name).toBe(full.headers[name])
    }
    expect(notModified.headers.age).toBeDefined()
    expect(notModified.headers['content-type']).toBeUndefined()
    expect(runs()).toBe(1)
  })

  it('uses the weak comparison, lists and *', async () => {
    const server = await app({}, 'W/"v1"')
    await server.get('/r')
    const statuses = []
    for (const condition of ['"v1"', 'W/"v1"', '"x", W/"v1", "y"', '*', '"v2"', '"x", "y"']) {
      statuses.push((await server.get('/r').set('If-None-Match', condition)).status)
    }
    expect(statuses).toEqual([304, 304, 304, 304, 200, 200])
  })

  it('If-None-Match takes precedence over If-Modified-Since; If-Modified-Since alone uses Last-Modified', async () => {
    const server = await app()
    await server.get('/r')
    const later = 'Thu, 02 Jan 2025 00:00:00 GMT'
    expect((await server.get('/r').set('If-None-Match', '"other"').set('If-Modified-Since', later)).status).toBe(200)
    expect((await server.get('/r').set('If-Modified-Since', later)).status).toBe(304)
    expect((await server.get('/r').set('If-Modified-Since', 'Tue, 31 Dec 2024 00:00:00 GMT')).status).toBe(200)
  })

  it('answers the validators on the miss too: the handler always produced a full response to store', async () => {
    const server = await app()
    const miss = await server.get('/r').set('If-None-Match', '"v1"')
    expect(miss.status).toBe(304)
    expect(miss.headers['x-cache']).toBe('MISS')
    const hit = await server.get('/r')
    expect(hit.status).toBe(200)
    expect(hit.text).toBe('representation')
    expect(runs()).toBe(1)
  })

  describe('a response too large to store (sendFile) keeps Range and validators, as without the cache', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sg-')), 'big.bin')
    const bytes = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251))
    writeFileSync(file, bytes)
    const big = () => route((_req, res) => void res.sendFile(file), { maxBodyBytes: 100_000 })

    it('Range: a 206 with the requested bytes, not the whole file', async () => {
      const server = await big()
      for (let i = 0; i < 2; i++) {
        const partial = await raw(server.port, '/r', { headers: { range: 'bytes=0-99' } })
        expect(partial.status).toBe(206)
        expect(partial.body.equals(bytes.subarray(0, 100))).toBe(true)
        expect(partial.headers['x-cache']).toBe('BYPASS')
      }
    })

    it('If-None-Match: a 304, on the first request and during hit-for-miss', async () => {
      const server = await big()
      const full = await raw(server.port, '/r?probe') // the file's ETag, from another key
      expect(full.body.equals(bytes)).toBe(true)
      for (let i = 0; i < 2; i++) {
        // the leader of a cold key, then a hit-for-miss request
        const notModified = await raw(server.port, '/r', { headers: { 'if-none-match': full.headers.etag! } })
        expect(notModified.status).toBe(304)
        expect(notModified.body.length).toBe(0)
        expect(notModified.headers.etag).toBe(full.headers.etag)
        expect(notModified.headers['x-cache']).toBe('BYPASS')
      }
      expect(runs()).toBe(3)
    })
  })

  it("etag: 'strong' replaces Express's weak ETag with one computed from the body; etag: false drops it", async () => {
    let server = await app({ etag: 'strong' }, '')
    const strong = await server.get('/r')
    expect(strong.headers.etag).toMatch(/^"[\w-]{27}"$/)
    expect((await server.get('/r').set('If-None-Match', strong.headers.etag!)).status).toBe(304)
    await server.close()
    await cache().close()
    server = await app({ etag: false })
    const none = await server.get('/r')
    expect(none.headers.etag).toBeUndefined()
    expect((await server.get('/r').set('If-None-Match', '"v1"')).status).toBe(200)
    expect((await server.get('/r').set('If-Modified-Since', LAST_MODIFIED)).status).toBe(304)
  })
})
