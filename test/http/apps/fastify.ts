import { Readable } from 'node:stream'
import Fastify from 'fastify'
import { fastifyCache } from '../../../src/fastify/index.js'
import { METHODS, neutralHeaders, type ConformanceAdapter } from '../adapter.js'

export const fastifyAdapter: ConformanceAdapter = {
  name: 'fastify',
  async serve(cache, routes) {
    const app = Fastify()
    await app.register(fastifyCache, { cache })
    for (const route of routes) {
      app.route({
        method: METHODS.filter((method) => method !== 'HEAD'), // Fastify adds HEAD for GET
        url: route.path,
        config: { cache: route.options },
        handler: async (request, reply) => {
          const response = await route.handler({
            method: request.method,
            url: request.url,
            headers: neutralHeaders(request.headers),
            authority: request.host,
          })
          reply.code(response.status ?? 200)
          for (const [name, value] of Object.entries(response.headers ?? {})) reply.header(name, value)
          const body = response.body
          if (body === undefined) return reply.send()
          if (typeof body === 'string' || Buffer.isBuffer(body)) return reply.send(body)
          return reply.send(Readable.from(body))
        },
      })
    }
    await app.listen({ port: 0, host: '127.0.0.1' })
    return {
      port: (app.server.address() as { port: number }).port,
      close: async () => {
        app.server.closeAllConnections()
        await app.close()
      },
    }
  },
}
