/**
 * One app per framework for `npm run load -- --framework`: the same handler on two routes,
 * `/bare` (runs every time) and `/cached` (behind the framework's stampede-guard adapter).
 * The handler builds and serializes a 50-row JSON page (about 4 KiB), the kind of work a
 * cache is put in front of. Nest's controllers are built with its decorators applied as
 * functions, so this file runs under tsx without a decorator transform.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import 'reflect-metadata'
import { serve as serveHono } from '@hono/node-server'
import { All, Controller, Module } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import Koa from 'koa'
import type { Cache } from '../../src/index.js'
import { cacheRoute as expressCache } from '../../src/express/index.js'
import { fastifyCache } from '../../src/fastify/index.js'
import { cacheRoute as honoCache } from '../../src/hono/index.js'
import { cacheRoute as koaCache } from '../../src/koa/index.js'
import { CacheRoute, CacheRouteInterceptor } from '../../src/nestjs/index.js'

export const FRAMEWORKS = ['express', 'fastify', 'hono', 'koa', 'nestjs-express', 'nestjs-fastify'] as const
export type Framework = (typeof FRAMEWORKS)[number]
export const isFramework = (name: string): name is Framework => (FRAMEWORKS as readonly string[]).includes(name)

const OPTIONS = { ttl: '10m' }

/** The route's work: 50 rows built and serialized. */
export function page(): { rows: Array<{ id: number; name: string; price: number; tags: string[] }> } {
  const rows = []
  for (let id = 0; id < 50; id++)
    rows.push({ id, name: `product ${id}`, price: Math.round(id * 1.37 * 100) / 100, tags: ['a', 'b', `t${id % 7}`] })
  return { rows }
}

export interface Served {
  port: number
  close(): Promise<void>
}

export async function serveFramework(framework: Framework, cache: Cache): Promise<Served> {
  switch (framework) {
    case 'express': {
      const app = express()
      app.get('/bare', (_req, res) => void res.json(page()))
      app.get('/cached', expressCache(cache, OPTIONS), (_req, res) => void res.json(page()))
      return listen(http.createServer(app))
    }
    case 'fastify': {
      const app = Fastify()
      await app.register(fastifyCache, { cache })
      app.get('/bare', async () => page())
      app.get('/cached', { config: { cache: OPTIONS } }, async () => page())
      await app.listen({ port: 0, host: '127.0.0.1' })
      return { port: (app.server.address() as AddressInfo).port, close: () => app.close() }
    }
    case 'hono': {
      const app = new Hono()
      app.get('/bare', (c) => c.json(page()))
      app.get('/cached', honoCache(cache, OPTIONS), (c) => c.json(page()))
      const server = serveHono({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as http.Server
      await new Promise((resolve) => server.once('listening', resolve))
      return { port: (server.address() as AddressInfo).port, close: () => closeServer(server) }
    }
    case 'koa': {
      const app = new Koa()
      const cached = koaCache(cache, OPTIONS)
      app.use(async (ctx, next) => {
        if (ctx.path === '/bare') ctx.body = page()
        else if (ctx.path === '/cached') await cached(ctx, async () => void (ctx.body = page()))
        else await next()
      })
      return listen(http.createServer(app.callback()))
    }
    case 'nestjs-express':
    case 'nestjs-fastify': {
      class PageController {
        bare() {
          return page()
        }
        cached() {
          return page()
        }
      }
      const method = (name: 'bare' | 'cached') => Object.getOwnPropertyDescriptor(PageController.prototype, name)!
      All('bare')(PageController.prototype, 'bare', method('bare'))
      All('cached')(PageController.prototype, 'cached', method('cached'))
      CacheRoute(OPTIONS)(PageController.prototype, 'cached', method('cached'))
      Controller()(PageController)
      class PageModule {}
      Module({ controllers: [PageController] })(PageModule)
      const adapter = framework === 'nestjs-express' ? new ExpressAdapter() : new FastifyAdapter()
      const app = await NestFactory.create(PageModule, adapter, { logger: false })
      app.useGlobalInterceptors(new CacheRouteInterceptor(cache))
      await app.listen(0, '127.0.0.1')
      return { port: Number(new URL(await app.getUrl()).port), close: () => app.close() }
    }
  }
}

async function listen(server: http.Server): Promise<Served> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { port: (server.address() as AddressInfo).port, close: () => closeServer(server) }
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })
}
