/**
 * The Nest interceptor attacked: bad options refused when the decorator or interceptor is
 * made (at startup), Redis stopped (requests still answered by their handlers), and a
 * route with its own @Head() handler (never run as the GET's fetch, never stored for GET).
 */
import 'reflect-metadata'
import { Controller, Get, Head, Module, Res } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { afterEach, describe, expect, it } from 'vitest'
import type { Cache } from '../../src/index.js'
import { CacheRoute, CacheRouteInterceptor, InvalidateTags } from '../../src/nestjs/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { raw, testCache } from '../express/helpers.js'

describe('Nest decorators and interceptor options', () => {
  it('refuse bad options when made, naming the option', () => {
    expect(() => CacheRoute({ ttl: 'soon' })).toThrow(/cacheRoute\.ttl/)
    expect(() => CacheRoute({ ttl: '1s', statuses: [500] })).toThrow(/cacheRoute\.statuses/)
    expect(() => CacheRoute({ nope: true } as never)).toThrow(/cacheRoute\.nope/)
    expect(() => InvalidateTags()).toThrow(/at least one tag/)
    expect(() => InvalidateTags('' as string)).toThrow(/non-empty string/)
    const cache = testCache(undefined)
    expect(() => new CacheRouteInterceptor(cache, { staleTtl: -1 as never })).toThrow(/cacheRoute\.staleTtl/)
    void cache.close()
  })
})

let runs = 0
let headRuns = 0

// The HEAD route first: Express answers HEAD with the first route that matches, GET ones included.
@Controller()
class PagesController {
  @Head('page')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  pageHead(@Res({ passthrough: true }) res: { setHeader(name: string, value: string): void }) {
    headRuns++
    res.setHeader('X-Head', 'own')
    return ''
  }

  @Get('page')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  page() {
    runs++
    return { page: runs }
  }
}

@Module({ controllers: [PagesController] })
class PagesModule {}

for (const platform of ['express', 'fastify'] as const) {
  describe.skipIf(!redisAvailable)(`Nest interceptor under attack (platform-${platform})`, () => {
    let redis: RedisServer | undefined
    let cache: Cache | undefined
    let close: (() => Promise<void>) | undefined

    afterEach(async () => {
      await close?.()
      await cache?.close()
      await redis?.stop()
      redis = cache = close = undefined
      runs = headRuns = 0
    })

    async function serve(): Promise<number> {
      redis = await startRedis()
      cache = testCache(redis)
      const app = await NestFactory.create(
        PagesModule,
        platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
        { logger: false },
      )
      app.useGlobalInterceptors(new CacheRouteInterceptor(cache))
      await app.listen(0, '127.0.0.1')
      close = () => app.close()
      return Number(new URL(await app.getUrl()).port)
    }

    it("Redis stopped: every request gets its handler's response", async () => {
      const port = await serve()
      expect((await raw(port, '/page')).headers['x-cache']).toBe('MISS')
      await redis!.stop()
      const answers = []
      for (let i = 0; i < 3; i++) answers.push(await raw(port, '/page?fresh=' + i))
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200])
      expect(runs).toBe(4)
    })

    // Fastify declares a HEAD route for every GET itself and refuses a second one.
    it.skipIf(platform === 'fastify')(
      'a route with its own @Head() handler: HEAD runs it, and it is never stored for GET',
      async () => {
        const port = await serve()
        const head = await raw(port, '/page', { method: 'HEAD' })
        expect([head.status, head.headers['x-head']]).toEqual([200, 'own'])
        const get = await raw(port, '/page')
        expect([get.headers['x-cache'], get.body.toString()]).toEqual(['MISS', '{"page":1}'])
        expect([runs, headRuns]).toEqual([1, 1])
      },
    )
  })
}
