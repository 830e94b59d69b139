import { serve } from '@hono/node-server'
import { Hono } from 'hono'
import { cacheRoute } from '../../../src/hono/index.js'
import { METHODS, neutralHeaders, type ConformanceAdapter } from '../adapter.js'

export const honoAdapter: ConformanceAdapter = {
  name: 'hono',
  async serve(cache, routes) {
    const app = new Hono()
    for (const route of routes) {
      app.on([...METHODS], route.path, cacheRoute(cache, route.options), async (c) => {
        const headers: Record<string, string> = {}
        c.req.raw.headers.forEach((value, name) => (headers[name] = value))
        const url = new URL(c.req.url)
        const response = await route.handler({
          method: c.req.method,
          url: url.pathname + url.search,
          headers: neutralHeaders(headers),
          authority: url.host,
        })
        const out = new Headers()
        for (const [name, value] of Object.entries(response.headers ?? {}))
          for (const item of Array.isArray(value) ? value : [value]) out.append(name, item)
        return new Response(bodyOf(response.body), { status: response.status ?? 200, headers: out })
      })
    }
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise((resolve) => server.once('listening', resolve))
    return {
      port: (server.address() as { port: number }).port,
      close: () =>
        new Promise<void>((resolve) => {
          ;(server as unknown as { closeAllConnections(): void }).closeAllConnections()
          server.close(() => resolve())
        }),
    }
  },
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
