import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import Koa from 'koa'
import { cacheRoute } from '../../../src/koa/index.js'
import { neutralHeaders, type ConformanceAdapter } from '../adapter.js'

export const koaAdapter: ConformanceAdapter = {
  name: 'koa',
  async serve(cache, routes) {
    const app = new Koa()
    app.silent = true // a throwing handler is a case, not news
    const byPath = new Map(routes.map((route) => [route.path, { route, cached: cacheRoute(cache, route.options) }]))
    app.use(async (ctx, next) => {
      const entry = byPath.get(ctx.path)
      if (!entry) return next()
      await entry.cached(ctx, async () => {
        const request = {
          method: ctx.method,
          url: ctx.originalUrl,
          headers: neutralHeaders(ctx.req.headers),
          authority: ctx.host,
        }
        const response = await entry.route.handler(request)
        ctx.status = response.status ?? 200
        for (const [name, value] of Object.entries(response.headers ?? {})) ctx.set(name, value)
        const body = response.body
        // A body failing midway: Koa's pipeline destroys the response, the connection is cut.
        if (body !== undefined)
          ctx.body = typeof body === 'string' || Buffer.isBuffer(body) ? body : Readable.from(body)
        else if (response.status === undefined || response.status < 300) ctx.body = ''
      })
    })
    const server = http.createServer(app.callback())
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return {
      port: (server.address() as AddressInfo).port,
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        }),
    }
  },
}
