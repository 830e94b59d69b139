import http from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { cacheRoute } from '../../../src/express/index.js'
import { neutralHeaders, type ConformanceAdapter } from '../adapter.js'

export const expressAdapter: ConformanceAdapter = {
  name: 'express',
  async serve(cache, routes) {
    const app = express()
    for (const route of routes) {
      app.all(route.path, cacheRoute(cache, route.options), (req, res, next) => {
        const request = {
          method: req.method,
          url: req.originalUrl,
          headers: neutralHeaders(req.headers),
          authority: req.host ?? '',
        }
        Promise.resolve()
          .then(() => route.handler(request))
          .then(async (response) => {
            res.status(response.status ?? 200)
            for (const [name, value] of Object.entries(response.headers ?? {})) res.setHeader(name, value)
            const body = response.body
            if (body === undefined || typeof body === 'string' || Buffer.isBuffer(body)) return void res.end(body)
            try {
              for await (const chunk of body) res.write(chunk)
              res.end()
            } catch {
              res.destroy() // a body failing midway: the connection is cut, as Express does
            }
          })
          .catch(next)
      })
    }
    const server = http.createServer(app)
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
