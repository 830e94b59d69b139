/**
 * Rule 5 / acceptance 2: replay is byte-exact, with the compression middleware before
 * and after cacheRoute; a compressed body never travels without its Content-Encoding,
 * nor an identity body with one.
 */
import { gunzipSync, brotliDecompressSync } from 'node:zlib'
import { readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { fileURLToPath } from 'node:url'
import compression from 'compression'
import type { RequestHandler, Response } from 'express'
import { describe, expect, it } from 'vitest'
import { redisAvailable } from '../support/redis.js'
import { raw, useRouteHarness, type RawResponse, type RoutePlacement } from './helpers.js'

/** Every byte value, several times: any text decoding or re-encoding would show. */
const BINARY = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7) % 256))
const TEXT = 'The quick brown fox. '.repeat(200)

/** The body a client really decodes, checked against the header that says how. */
function decoded(res: RawResponse): string {
  const encoding = res.headers['content-encoding']
  if (encoding === 'gzip') {
    expect(res.body.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]))
    return gunzipSync(res.body).toString()
  }
  if (encoding === 'br') return brotliDecompressSync(res.body).toString()
  expect(encoding).toBeUndefined()
  expect(res.body.subarray(0, 2)).not.toEqual(Buffer.from([0x1f, 0x8b]))
  return res.body.toString()
}

describe.skipIf(!redisAvailable)('replay', () => {
  const { route, runs } = useRouteHarness({ method: 'get' })

  const app = (handler: RequestHandler, around: Pick<RoutePlacement, 'before' | 'after'> = {}) =>
    route(handler, {}, around)

  it('replays status, reason phrase, headers and binary body exactly', async () => {
    const server = await app((_req, res) => {
      res.writeHead(203, 'Partly True', {
        'Content-Type': 'application/x-thing',
        'X-Multi': ['a', 'b'],
        'Content-Disposition': 'inline; filename="x.bin"',
      })
      res.write(BINARY.subarray(0, 1000))
      res.end(BINARY.subarray(1000))
    })
    const miss = await raw(server.port, '/r')
    const hit = await raw(server.port, '/r')
    expect(hit.headers['x-cache']).toBe('HIT')
    for (const res of [miss, hit]) {
      expect(res.status).toBe(203)
      expect(res.body.equals(BINARY)).toBe(true)
      expect(res.headers['content-type']).toBe('application/x-thing')
      expect(res.headers['x-multi']).toBe('a, b')
      expect(res.headers['content-length']).toBe(String(BINARY.length))
    }
    const statusLine = await new Promise<string>((resolve) => {
      const socket = connect(server.port, '127.0.0.1', () =>
        socket.write('GET /r HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n'),
      )
      let text = ''
      socket.on('data', (d: Buffer) => (text += d.toString('latin1')))
      socket.on('end', () => resolve(text.split('\r\n')[0]!))
    })
    expect(statusLine).toBe('HTTP/1.1 203 Partly True')
    expect(runs()).toBe(1)
  })

  it('an invalid reason phrase fails in the handler, as it would uncached, and is never stored', async () => {
    const errors: unknown[] = []
    const server = await route(
      (_req, res) => {
        res.statusMessage = 'OK\r\nX-Injected: 1'
        res.send('hi')
      },
      { onError: (error) => errors.push(error) },
    )
    for (let i = 0; i < 2; i++) {
      const res = await server.get('/r').timeout(5000)
      expect(res.status).toBe(500) // Express's error handler, as without cacheRoute
      expect(res.headers['x-injected']).toBeUndefined()
      expect(res.headers['x-cache']).toBe('BYPASS')
    }
    expect(runs()).toBe(2)
    expect(errors).toEqual([])
  })

  it('a replay that throws (here an upstream writeHead hook) is answered 502 and reported, never left hanging', async () => {
    const errors: unknown[] = []
    const failsOnce: RequestHandler = (_req, res, next) => {
      const writeHead = res.writeHead
      let fail = true
      res.writeHead = function (this: Response, ...args: unknown[]) {
        if (fail) {
          fail = false
          throw new Error('hook failed')
        }
        return (writeHead as (...a: unknown[]) => Response).apply(this, args)
      } as Response['writeHead']
      next()
    }
    const server = await route(
      (_req, res) => void res.send('page'),
      { onError: (error) => errors.push(error) },
      { before: [failsOnce] },
    )
    for (let i = 0; i < 2; i++) {
      const res = await server.get('/r').timeout(5000)
      expect(res.status).toBe(502)
      expect(res.text).toBe('')
    }
    expect(errors.map(String)).toEqual(['Error: hook failed', 'Error: hook failed'])
  })

  it('replays res.json, res.sendFile and res.send(Buffer) byte for byte', async () => {
    const file = fileURLToPath(import.meta.url)
    const server = await app((req, res) => {
      if (req.query.kind === 'json') return void res.json({ list: [1, 2, 3], text: 'héllo ✓' })
      if (req.query.kind === 'file') return void res.sendFile(file, { maxAge: '1h' }) // its default max-age=0 is not stored
      res.type('bin').send(BINARY)
    })
    for (const kind of ['json', 'file', 'buffer']) {
      const miss = await raw(server.port, `/r?kind=${kind}`)
      const hit = await raw(server.port, `/r?kind=${kind}`)
      expect(hit.headers['x-cache'], kind).toBe('HIT')
      expect(hit.body.equals(miss.body), kind).toBe(true)
      expect(hit.headers['content-type']).toBe(miss.headers['content-type'])
      expect(hit.headers.etag).toBe(miss.headers.etag)
    }
    expect((await raw(server.port, '/r?kind=file')).body.equals(readFileSync(file))).toBe(true)
    expect(runs()).toBe(3)
  })

  it('compression AFTER cacheRoute: the compressed bytes are stored with their Content-Encoding, per Accept-Encoding variant', async () => {
    const server = await app((_req, res) => void res.type('text').send(TEXT), {
      after: [compression({ threshold: 0 })],
    })
    const gzipMiss = await raw(server.port, '/r', { headers: { 'accept-encoding': 'gzip' } })
    const gzipHit = await raw(server.port, '/r', { headers: { 'accept-encoding': 'gzip' } })
    const plainMiss = await raw(server.port, '/r', { headers: { 'accept-encoding': 'identity' } })
    const plainHit = await raw(server.port, '/r', { headers: { 'accept-encoding': 'identity' } })
    const brHit = [
      await raw(server.port, '/r', { headers: { 'accept-encoding': 'br' } }),
      await raw(server.port, '/r', { headers: { 'accept-encoding': 'br' } }),
    ][1]!
    expect([gzipMiss, gzipHit, plainMiss, plainHit, brHit].map((r) => r.headers['x-cache'])).toEqual([
      'MISS',
      'HIT',
      'MISS',
      'HIT',
      'HIT',
    ])
    expect(gzipHit.headers['content-encoding']).toBe('gzip')
    expect(gzipHit.body.equals(gzipMiss.body)).toBe(true)
    expect(brHit.headers['content-encoding']).toBe('br')
    for (const res of [gzipMiss, gzipHit, plainMiss, plainHit, brHit]) {
      expect(decoded(res)).toBe(TEXT)
      expect(res.headers.vary).toBe('Accept-Encoding')
    }
    expect(runs()).toBe(3)
  })

  it('compression BEFORE cacheRoute: the identity bytes are stored and compressed anew for each client', async () => {
    const server = await app((_req, res) => void res.type('text').send(TEXT), {
      before: [compression({ threshold: 0 })],
    })
    const responses = []
    for (const encoding of ['gzip', 'identity', 'gzip', 'identity', 'br']) {
      responses.push(await raw(server.port, '/r', { headers: { 'accept-encoding': encoding } }))
    }
    expect(responses.map((r) => r.headers['x-cache'])).toEqual(['MISS', 'HIT', 'HIT', 'HIT', 'HIT'])
    expect(responses.map((r) => r.headers['content-encoding'])).toEqual(['gzip', undefined, 'gzip', undefined, 'br'])
    for (const res of responses) expect(decoded(res)).toBe(TEXT)
    expect(runs()).toBe(1)
  })

  it('compression on both sides never double-encodes', async () => {
    const server = await app((_req, res) => void res.type('text').send(TEXT), {
      before: [compression({ threshold: 0 })],
      after: [compression({ threshold: 0 })],
    })
    for (const encoding of ['gzip', 'gzip', 'identity', 'identity']) {
      const res = await raw(server.port, '/r', { headers: { 'accept-encoding': encoding } })
      expect(decoded(res)).toBe(TEXT)
    }
  })
  it('writeHead with a flat header array overrides headers set before, as Node does (a JSON body is never sent as text/html)', async () => {
    const server = await app((_req, res) => {
      res.setHeader('Content-Type', 'text/html; charset=utf-8')
      res.setHeader('X-Dup', 'earlier')
      res.writeHead(200, ['Content-Type', 'application/json', 'X-Dup', 'a', 'X-Dup', 'b'])
      res.end('{"ok":true}')
    })
    const miss = await raw(server.port, '/r')
    const hit = await raw(server.port, '/r')
    expect(hit.headers['x-cache']).toBe('HIT')
    for (const res of [miss, hit]) {
      expect(res.headers['content-type']).toBe('application/json')
      expect(res.headers['x-dup']).toBe('a, b')
      expect(res.body.toString()).toBe('{"ok":true}')
    }
  })

  it('writeHead with an odd-length header array throws, as Node does; nothing is stored', async () => {
    const server = await app((_req, res) => {
      try {
        res.writeHead(200, ['Content-Type'])
      } catch (error) {
        res.status(500).send((error as { code?: string }).code ?? 'threw')
        return
      }
      res.end('wrote')
    })
    const first = await raw(server.port, '/r')
    expect(first.status).toBe(500)
    expect(first.body.toString()).toBe('ERR_INVALID_ARG_VALUE')
    expect((await raw(server.port, '/r')).headers['x-cache']).not.toBe('HIT')
  })
})
