/**
 * The Nest adapter's app factory, over either platform. Its controllers are built with
 * Nest's decorators applied as functions (no decorator syntax), so this file compiles
 * the same under any transform: the cross-process worker runs it through tsx.
 */
import 'reflect-metadata'
import { All, Controller, Module, Req, type INestApplication } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { CacheRoute, CacheRouteInterceptor, type NestRequestLike } from '../../../src/nestjs/index.js'
import { neutralHeaders, type ConformanceAdapter, type NeutralRoute } from '../adapter.js'

export function nestAdapter(platform: 'express' | 'fastify'): ConformanceAdapter {
  return {
    name: `nestjs-${platform}`,
    async serve(cache, routes) {
      const app: INestApplication = await NestFactory.create(
        moduleOf(routes),
        platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
        { logger: false },
      )
      app.useGlobalInterceptors(new CacheRouteInterceptor(cache))
      await app.listen(0, '127.0.0.1')
      return { port: Number(new URL(await app.getUrl()).port), close: () => app.close() }
    },
  }
}

export const nestExpressAdapter = nestAdapter('express')
export const nestFastifyAdapter = nestAdapter('fastify')

/** A module with one controller per route: `@All(path)`, `@CacheRoute(options)`, the neutral handler's response as a web Response. */
function moduleOf(routes: NeutralRoute[]) {
  const controllers = routes.map((route) => {
    class RouteController {
      async handle(req: NestRequestLike) {
        const request = {
          method: req.method,
          url: req.originalUrl ?? req.url,
          headers: neutralHeaders(req.headers),
          // Express's req.host, Fastify's request.host: the platform's own view of the authority.
          authority: (req as { host?: string }).host ?? '',
        }
        const response = await route.handler(request)
        const headers = new Headers()
        for (const [name, value] of Object.entries(response.headers ?? {}))
          for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item)
        const status = response.status ?? 200
        const body = [204, 304].includes(status) ? null : bodyOf(response.body)
        return new Response(body, { status, headers })
      }
    }
    const descriptor = Object.getOwnPropertyDescriptor(RouteController.prototype, 'handle')!
    Req()(RouteController.prototype, 'handle', 0)
    All(route.path)(RouteController.prototype, 'handle', descriptor)
    CacheRoute(route.options)(RouteController.prototype, 'handle', descriptor)
    Controller()(RouteController)
    return RouteController
  })
  class AppModule {}
  Module({ controllers })(AppModule)
  return AppModule
}

function bodyOf(body: string | Buffer | AsyncIterable<Buffer> | undefined): BodyInit | null {
  if (body === undefined) return null
  if (typeof body === 'string') return body
  if (Buffer.isBuffer(body)) return new Uint8Array(body)
  const iterator = body[Symbol.asyncIterator]()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const step = await iterator.next()
        if (step.done) controller.close()
        else controller.enqueue(new Uint8Array(step.value))
      } catch (error) {
        controller.error(error)
      }
    },
  })
}
