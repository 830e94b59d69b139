/**
 * Cached responses with a binary codec and compression: a response stored compressed by one
 * app's cache is replayed byte for byte by another's that does not compress (as a second
 * process would), and a body that does not compress (random bytes, an image) is stored as
 * it is.
 */
import { randomBytes } from 'node:crypto'
import express, { type Express } from 'express'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { cacheRoute } from '../../src/express/index.js'
import { msgpackCodec, type Cache, type CacheOptions } from '../../src/index.js'
import { startRedis, redisAvailable, type RedisServer } from '../support/redis.js'
import { raw, serve, testCache, type Served } from './helpers.js'

const TEXT = Buffer.from('<li>The quick brown fox. </li>'.repeat(400))
const NOISE = randomBytes(40_000)

describe.skipIf(!redisAvailable)('cached responses stored compressed, with a binary codec', () => {
  let redis: RedisServer | undefined
  const open: { served: Served; cache: Cache }[] = []
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })
  afterEach(async () => {
    for (const { served, cache } of open.splice(0)) {
      await served.close()
      await cache.close()
    }
  })

  let runs = 0
  async function app(options: Partial<CacheOptions>): Promise<Served> {
    const cache = testCache(redis, { namespace: 'http', codec: msgpackCodec(), ...options })
    const built: Express = express()
    built.get('/:kind', cacheRoute(cache, { ttl: '30s', xCacheHeader: true }), (req, res) => {
      runs++
      res.type(req.params.kind === 'text' ? 'text/html' : 'application/octet-stream')
      res.send(req.params.kind === 'text' ? TEXT : NOISE)
    })
    const served = await serve(built)
    open.push({ served, cache })
    return served
  }

  /** The stored form of the response at `path` (what follows the record's 6 fields). */
  async function storedData(): Promise<Buffer[]> {
    const admin = redis!.client()
    const keys = await admin.keys('http:*:v')
    const values = await Promise.all(keys.map((key) => admin.getBuffer(key)))
    admin.disconnect()
    return values.map((record) => {
      let at = 0
      for (let bars = 0; bars < 6; bars++) at = record!.indexOf('|', at) + 1
      return record!.subarray(at)
    })
  }

  it('a compressible body: stored ~20× smaller, replayed exactly by a cache that does not compress; noise stored as is', async () => {
    runs = 0
    const writer = await app({ compression: { minBytes: 1024 } })
    const reader = await app({})
    const miss = await raw(writer.port, '/text')
    expect(miss.headers['x-cache']).toBe('MISS')
    const [stored] = await storedData()
    expect(stored!.subarray(0, 5).toString('latin1')).toBe('\0sgzb')
    expect(stored!.length).toBeLessThan(TEXT.length / 20)
    const hit = await raw(reader.port, '/text')
    expect(hit.headers['x-cache']).toBe('HIT')
    for (const res of [miss, hit]) {
      expect(res.body.equals(TEXT)).toBe(true)
      expect(res.headers['content-type']).toMatch(/^text\/html/)
    }
    expect(runs).toBe(1)

    await raw(writer.port, '/noise')
    const noise = (await storedData()).find((data) => data.length > NOISE.length)!
    expect(noise.subarray(0, 5).toString('latin1')).toBe('\0sgb1') // saves nothing: not compressed
    expect(noise.includes(NOISE)).toBe(true)
    const noiseHit = await raw(reader.port, '/noise')
    expect(noiseHit.headers['x-cache']).toBe('HIT')
    expect(noiseHit.body.equals(NOISE)).toBe(true)
    expect(runs).toBe(2)
  })
})
