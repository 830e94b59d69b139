/**
 * The Nest interceptor attacked: bad options refused when the decorator or interceptor is
 * made (at startup), Redis stopped (requests still answered by their handlers), a
 * route with its own @Head() handler (never run as the GET's fetch, never stored for GET),
 * a URL rewritten before routing, a guard that refuses, and an HttpException thrown once
 * a resource is gone (an answer, never covered by a stale response), and @Redirect() and
 * @Render() routes, whose response Nest builds after the interceptor from the value.
 */
import 'reflect-metadata'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import {
  Controller,
  NotFoundException,
  Redirect,
  Render,
  Get,
  Head,
  Module,
  Res,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import type { Cache } from '../../src/index.js'
import { CacheRoute, CacheRouteInterceptor, InvalidateTags } from '../../src/nestjs/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { raw, sleep, testCache } from '../express/helpers.js'

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

let secretRuns = 0
let productGone = false
let redirectRuns = 0
let renderRuns = 0

/** Lets a request through only with the right API key (a header no key is made of). */
class ApiKeyGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>()
    return req.headers['x-api-key'] === 'good'
  }
}

@Controller()
class RewriteController {
  @Get('public')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  public() {
    return { page: 'public' }
  }

  @Get('preview')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  preview() {
    return { page: 'unreleased preview' }
  }

  @Get('product')
  @CacheRoute({ ttl: '1s', staleIfError: '1m', xCacheHeader: true })
  product() {
    if (productGone) throw new NotFoundException('no such product')
    return { product: 7 }
  }

  @Get('latest')
  @Redirect('/products', 302)
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  latest() {
    redirectRuns++
    return { url: `/products/${redirectRuns}`, statusCode: 301 } // a 301 would be stored
  }

  @Get('view')
  @Render('page')
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  view() {
    renderRuns++
    return { name: 'world', internalNote: 'not for the page' }
  }

  @Get('report')
  @UseGuards(ApiKeyGuard)
  @CacheRoute({ ttl: '30s', xCacheHeader: true })
  report() {
    secretRuns++
    return { report: 'secret' }
  }
}

@Module({ controllers: [RewriteController] })
class RewriteModule {}

/** A template directory for @Render() (Express platform): one view, rendered by a function engine. */
const views = mkdtempSync(path.join(tmpdir(), 'nest-views-'))
writeFileSync(path.join(views, 'page.txt'), 'rendered by the engine')
afterAll(() => rmSync(views, { recursive: true, force: true }))

/** A rewrite before routing, driven by a header no key is made of (a preview switch). */
const previewHeader = (headers: Record<string, unknown>) => headers['x-preview'] === 'on'

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
      runs = headRuns = secretRuns = 0
      productGone = false
      redirectRuns = renderRuns = 0
    })

    async function serve(module: object = PagesModule): Promise<number> {
      redis = await startRedis()
      cache = testCache(redis)
      const app = await NestFactory.create(
        module,
        platform === 'express'
          ? new ExpressAdapter()
          : new FastifyAdapter({
              rewriteUrl: (req: { url?: string; headers: Record<string, unknown> }) =>
                previewHeader(req.headers) ? '/preview' : (req.url ?? '/'),
            }),
        { logger: false },
      )
      if (platform === 'express') {
        const express = app as unknown as NestExpressApplication
        express.engine('txt', (_path: string, locals: object, done: (error: null, html: string) => void) =>
          done(null, `hello ${(locals as { name?: string }).name}`),
        )
        express.setBaseViewsDir(views)
        express.setViewEngine('txt')
      }
      if (platform === 'express')
        app.use((req: { url: string; headers: Record<string, unknown> }, _res: unknown, next: () => void) => {
          if (previewHeader(req.headers)) req.url = '/preview'
          next()
        })
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

    it('a URL rewritten before routing passes by: the page it routed to is never stored for the URL asked', async () => {
      const port = await serve(RewriteModule)
      const rewritten = await raw(port, '/public', { headers: { 'x-preview': 'on' } })
      expect([rewritten.headers['x-cache'], rewritten.body.toString()]).toEqual([
        'BYPASS',
        '{"page":"unreleased preview"}',
      ])
      const clean = [await raw(port, '/public'), await raw(port, '/public')]
      expect(clean.map((r) => [r.headers['x-cache'], r.body.toString()])).toEqual([
        ['MISS', '{"page":"public"}'],
        ['HIT', '{"page":"public"}'],
      ])
    })

    it('a guard that refuses: never served from the cache, never stores, never marks the URL', async () => {
      const port = await serve(RewriteModule)
      expect((await raw(port, '/report')).status).toBe(403) // cold: refused before the cache
      const allowed = await raw(port, '/report', { headers: { 'x-api-key': 'good' } })
      expect([allowed.status, allowed.headers['x-cache']]).toEqual([200, 'MISS'])
      const refused = await raw(port, '/report', { headers: { 'x-api-key': 'stolen' } })
      expect([refused.status, refused.body.toString().includes('secret')]).toEqual([403, false])
      const again = await raw(port, '/report', { headers: { 'x-api-key': 'good' } })
      expect([again.headers['x-cache'], again.body.toString()]).toEqual(['HIT', '{"report":"secret"}'])
      expect(secretRuns).toBe(1)
    })

    it('a NotFoundException once the product is gone: Nest answers 404, never the stale 200', async () => {
      const port = await serve(RewriteModule)
      expect((await raw(port, '/product')).body.toString()).toBe('{"product":7}')
      expect((await raw(port, '/product')).headers['x-cache']).toBe('HIT') // stored (or collapsed into its commit)
      productGone = true
      await sleep(1100) // past ttl: the stored 200 is stale, kept for staleIfError
      const answers = [await raw(port, '/product'), await raw(port, '/product')]
      expect(answers.map((a) => [a.status, JSON.parse(a.body.toString()).message])).toEqual([
        [404, 'no such product'],
        [404, 'no such product'],
      ])
    })

    it('@Redirect() with a target from the value: each request redirected where its handler says, nothing stored', async () => {
      const port = await serve(RewriteModule)
      const answers = [await raw(port, '/latest'), await raw(port, '/latest')]
      expect(answers.map((a) => [a.status, a.headers.location])).toEqual([
        [301, '/products/1'],
        [301, '/products/2'],
      ])
      expect(redirectRuns).toBe(2)
    })

    // Fastify's platform needs @fastify/view for @Render(), not a dependency here.
    it.skipIf(platform === 'fastify')(
      '@Render(): the page is rendered from the value on every request, its locals never stored',
      async () => {
        const port = await serve(RewriteModule)
        const answers = [await raw(port, '/view'), await raw(port, '/view')]
        expect(answers.map((a) => [a.status, a.body.toString()])).toEqual([
          [200, 'hello world'],
          [200, 'hello world'],
        ])
        expect(renderRuns).toBe(2)
      },
    )
  })
}
