/**
 * The child of `npm run bench:frameworks`: one framework's app (FRAMEWORK = express,
 * fastify or hono) on a free 127.0.0.1 port, with the same handler twice: `/bare`, and
 * `/cached` behind stampede-guard on REDIS_URL. The handler waits QUERY_MS (a fast query)
 * and renders a ~4 KB JSON body. Sends { type: 'ready', port } over IPC.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { serve } from '@hono/node-server'
import express from 'express'
import Fastify from 'fastify'
import { Hono } from 'hono'
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import { cacheRoute as expressCache } from '../../src/express/index.js'
import { fastifyCache } from '../../src/fastify/index.js'
import { cacheRoute as honoCache } from '../../src/hono/index.js'

const QUERY_MS = Number(process.env.QUERY_MS ?? 5)
const redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 1 })
const cache = createCache({ redis, namespace: `bench-${process.pid}`, ttl: '60s' })
const options = { ttl: '60s' }

async function render(): Promise<object> {
  await sleep(QUERY_MS)
  return { items: Array.from({ length: 40 }, (_, id) => ({ id, name: `product ${id}`, price: id * 1.5, stock: 7 })) }
}

async function start(framework: string): Promise<number> {
  if (framework === 'express') {
    const app = express()
    const handler: express.RequestHandler = async (_req, res) => void res.json(await render())
    app.get('/bare', handler)
    app.get('/cached', expressCache(cache, options), handler)
    const server = http.createServer(app).listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    return (server.address() as AddressInfo).port
  }
  if (framework === 'fastify') {
    const app = Fastify()
    await app.register(fastifyCache, { cache })
    app.get('/bare', async () => render())
    app.get('/cached', { config: { cache: options } }, async () => render())
    await app.listen({ port: 0, host: '127.0.0.1' })
    return (app.server.address() as AddressInfo).port
  }
  if (framework === 'hono') {
    const app = new Hono()
    app.get('/bare', async (c) => c.json(await render()))
    app.get('/cached', honoCache(cache, options), async (c) => c.json(await render()))
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
    await new Promise((resolve) => server.once('listening', resolve))
    return (server.address() as AddressInfo).port
  }
  throw new Error(`unknown FRAMEWORK ${framework}`)
}

const port = await start(process.env.FRAMEWORK ?? 'express')
process.send!({ type: 'ready', port })
process.once('disconnect', () => process.exit(0))
