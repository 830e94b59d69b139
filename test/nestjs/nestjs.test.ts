/**
 * The Nest interceptor and decorators over both of Nest's HTTP platforms (Express and
 * Fastify), over real HTTP against a real redis-server. The controllers use constructor
 * injection, so this file also shows the legacy-decorator transform (vitest.config.ts)
 * emits the metadata Nest needs.
 */
import 'reflect-metadata'
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import {
  Controller,
  Get,
  Header,
  HttpCode,
  Injectable,
  Module,
  NotFoundException,
  Param,
  Post,
  Put,
  StreamableFile,
  type INestApplication,
} from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { Cache } from '../../src/index.js'
import { CacheRoute, CacheRouteInterceptor, InvalidateTags } from '../../src/nestjs/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { gate, sleep, until } from '../support/timing.js'
import { raw, testCache } from '../express/helpers.js'

/** Counts handler runs; the controllers get it by constructor injection. */
@Injectable()
class Counter {
  runs = 0
  version = 1
  release: Promise<void> = Promise.resolve()
}

@Controller('p')
class ProductsController {
  constructor(private readonly counter: Counter) {}

  @Get('json/:id')
  @CacheRoute({ ttl: '30s', xCacheHeader: true, tags: (req) => [`product:${String(req.params.id)}`] })
  async json(@Param('id') id: string) {
    this.counter.runs++
    await this.counter.release
    return { id, version: this.counter.version }
  }

  @Put('json/:id')
  @InvalidateTags((req) => [`product:${String(req.params.id)}`])
  update() {
    this.counter.runs++
    this.counter.version++
    return { ok: true }
  }

  @Get('text')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  @Header('X-Route', 'text')
  text() {
    this.counter.runs++
    return 'plain text'
  }

  @Get('code')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  @HttpCode(203)
  code() {
    this.counter.runs++
    return { code: 203 }
  }

  @Get('response')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  response() {
    this.counter.runs++
    return new Response('from a Response', { status: 200, headers: { 'content-type': 'text/csv', etag: '"r1"' } })
  }

  @Get('missing')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  missing() {
    this.counter.runs++
    throw new NotFoundException('no such product')
  }

  @Get('private')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  @Header('Cache-Control', 'private')
  mine() {
    this.counter.runs++
    return 'mine'
  }

  @Get('large')
  @CacheRoute({ ttl: '30s', xCacheHeader: true, maxBodyBytes: 10_000 })
  large() {
    this.counter.runs++
    return new StreamableFile(Readable.from(Array.from({ length: 10 }, () => Buffer.alloc(4096, 'z'))))
  }

  @Get('swr')
  @CacheRoute({ ttl: 100, staleTtl: '30s', xCacheHeader: true })
  @Header('X-Route', 'swr')
  swr() {
    this.counter.runs++
    return { version: this.counter.runs }
  }

  @Get('plain')
  plain() {
    this.counter.runs++
    return 'not cached'
  }
}

/** A controller marked as a whole: its GET is cached, a POST to the same URL invalidates it. */
@Controller('c')
@CacheRoute({ ttl: '30s', xCacheHeader: true })
class CollectionController {
  constructor(private readonly counter: Counter) {}

  @Get()
  list() {
    this.counter.runs++
    return { version: this.counter.version }
  }

  @Post()
  add() {
    this.counter.runs++
    this.counter.version++
    return { added: true }
  }
}

@Module({ controllers: [ProductsController, CollectionController], providers: [Counter] })
class AppModule {}

for (const platform of ['express', 'fastify'] as const) {
  describe.skipIf(!redisAvailable)(`NestJS interceptor on platform-${platform}`, () => {
    let redis: RedisServer
    let cache: Cache
    let app: INestApplication
    let counter: Counter
    let port: number

    beforeAll(async () => {
      redis = await startRedis()
    })
    afterAll(async () => {
      await redis?.stop()
    })
    beforeEach(async () => {
      cache = testCache(redis)
      app = await NestFactory.create(AppModule, platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(), {
        logger: false,
      })
      app.useGlobalInterceptors(new CacheRouteInterceptor(cache))
      await app.listen(0, '127.0.0.1')
      port = Number(new URL(await app.getUrl()).port)
      counter = app.get(Counter)
    })
    afterEach(async () => {
      await app?.close()
      await cache?.close()
    })

    const twice = async (path: string, headers: Record<string, string> = {}) => {
      const first = await raw(port, path, { headers })
      const second = await raw(port, path, { headers })
      return [first, second] as const
    }

    it('a burst of 20 concurrent requests on a cold URL runs the handler once', async () => {
      const release = gate()
      counter.release = release.promise
      const burst = Array.from({ length: 20 }, () => raw(port, '/p/json/1'))
      await until(() => counter.runs === 1, 'the leader to start')
      release.open()
      const answers = await Promise.all(burst)
      expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200))
      expect(answers.filter((a) => a.headers['x-cache'] === 'MISS')).toHaveLength(1)
      expect(new Set(answers.map((a) => a.body.toString()))).toEqual(new Set(['{"id":"1","version":1}']))
      expect(counter.runs).toBe(1)
    })

    it('stores JSON, text (with @Header), @HttpCode and a web Response; replays them byte for byte', async () => {
      for (const [path, status, type] of [
        ['/p/json/2', 200, 'application/json; charset=utf-8'],
        ['/p/text', 200, platform === 'express' ? 'text/html; charset=utf-8' : 'text/plain; charset=utf-8'],
        ['/p/code', 203, 'application/json; charset=utf-8'],
        ['/p/response', 200, 'text/csv'],
      ] as const) {
        const [first, second] = await twice(path)
        expect([first.status, second.status], path).toEqual([status, status])
        expect([first.headers['x-cache'], second.headers['x-cache']], path).toEqual(['MISS', 'HIT'])
        expect(second.headers['content-type'], path).toMatch(new RegExp(`^${type.replace(/[;]/g, '.')}`))
        expect(second.body.equals(first.body), path).toBe(true)
        expect(Number(second.headers['content-length']), path).toBe(second.body.length)
      }
      expect((await raw(port, '/p/text')).headers['x-route']).toBe('text')
      expect(counter.runs).toBe(4)
    })

    it('HEAD is answered from the GET entry; If-None-Match gets a 304', async () => {
      await raw(port, '/p/response')
      const head = await raw(port, '/p/response', { method: 'HEAD' })
      expect(head.status).toBe(200)
      expect(head.headers['content-length']).toBe(String('from a Response'.length))
      expect(head.body.length).toBe(0)
      expect(head.headers['x-cache']).toBe('HIT')
      const notModified = await raw(port, '/p/response', { headers: { 'if-none-match': '"r1"' } })
      expect(notModified.status).toBe(304)
      expect(notModified.body.length).toBe(0)
      expect(counter.runs).toBe(1)
    })

    it.skipIf(platform === 'fastify')(
      "on Express, a hit carries the ETag Express's res.send() gives a body, and that ETag gets a 304",
      async () => {
        // Express's default ETag (weak): the body's length in hex and its SHA-1, as the unmarked route shows.
        const weakEtag = (body: Buffer) =>
          `W/"${body.length.toString(16)}-${createHash('sha1').update(body).digest('base64').slice(0, 27)}"`
        const plain = await raw(port, '/p/plain')
        expect(plain.headers.etag).toBe(weakEtag(plain.body))
        const [first, second] = await twice('/p/json/5')
        expect([first.headers['x-cache'], second.headers['x-cache']]).toEqual(['MISS', 'HIT'])
        expect(second.body.toString()).toBe('{"id":"5","version":1}')
        expect(second.headers['content-type']).toBe('application/json; charset=utf-8')
        expect([first.headers.etag, second.headers.etag]).toEqual([weakEtag(second.body), weakEtag(second.body)])
        const notModified = await raw(port, '/p/json/5', { headers: { 'if-none-match': weakEtag(second.body) } })
        expect(notModified.status).toBe(304)
        expect(notModified.body.length).toBe(0)
        const other = await raw(port, '/p/json/5', { headers: { 'if-none-match': 'W/"other"' } })
        expect([other.status, other.headers['x-cache'], other.body.toString()]).toEqual([
          200,
          'HIT',
          '{"id":"5","version":1}',
        ])
        expect(counter.runs).toBe(2) // /p/plain once, /p/json/5 once
      },
    )

    it('@InvalidateTags drops the tagged entries before the write is answered', async () => {
      const [, hit] = await twice('/p/json/3')
      expect(hit.headers['x-cache']).toBe('HIT')
      expect((await raw(port, '/p/json/3', { method: 'PUT' })).status).toBe(200)
      const after = await raw(port, '/p/json/3')
      expect(after.headers['x-cache']).toBe('MISS')
      expect(JSON.parse(after.body.toString())).toEqual({ id: '3', version: 2 })
    })

    it('a POST through a @CacheRoute controller invalidates its URL', async () => {
      const [, hit] = await twice('/c')
      expect(hit.headers['x-cache']).toBe('HIT')
      expect((await raw(port, '/c', { method: 'POST' })).status).toBe(201)
      const after = await raw(port, '/c')
      expect(after.headers['x-cache']).toBe('MISS')
      expect(JSON.parse(after.body.toString())).toEqual({ version: 2 })
    })

    it("an exception is answered by Nest's filters and never stored", async () => {
      const [first, second] = await twice('/p/missing')
      expect([first.status, second.status]).toEqual([404, 404])
      expect(JSON.parse(second.body.toString()).message).toBe('no such product')
      expect(counter.runs).toBe(2)
    })

    it('a private response is not stored; unmarked routes pass through untouched', async () => {
      const [first, second] = await twice('/p/private')
      expect([first.headers['x-cache'], second.headers['x-cache']]).toEqual(['BYPASS', 'BYPASS'])
      const plain = await raw(port, '/p/plain')
      expect(plain.body.toString()).toBe('not cached')
      expect(plain.headers['x-cache']).toBeUndefined()
      expect(counter.runs).toBe(3)
    })

    it('stale-while-revalidate: a stale hit is answered at once, the handler refreshes it in the background', async () => {
      expect(JSON.parse((await raw(port, '/p/swr')).body.toString())).toEqual({ version: 1 })
      await sleep(150)
      const stale = await raw(port, '/p/swr')
      expect(stale.headers['x-cache']).toBe('STALE')
      expect(JSON.parse(stale.body.toString())).toEqual({ version: 1 })
      await until(() => counter.runs === 2, 'the background refresh')
      await until(async () => (await raw(port, '/p/swr')).body.toString() === '{"version":2}', 'the refreshed entry')
      const fresh = await raw(port, '/p/swr')
      expect(fresh.headers['x-cache']).toBe('HIT')
      expect(fresh.headers['x-route']).toBe('swr')
      expect(counter.runs).toBe(2)
    })

    it('a body past maxBodyBytes reaches its client whole and is not stored', async () => {
      const [first, second] = await twice('/p/large')
      expect([first.body.length, second.body.length]).toEqual([40_960, 40_960])
      expect(second.headers['x-cache']).toBe('BYPASS')
      expect(counter.runs).toBe(2)
    })
  })
}
