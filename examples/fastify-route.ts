/**
 * A Fastify app that caches a slow route with the stampede-guard plugin.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/fastify-route.ts
 *
 * It starts the app on a free 127.0.0.1 port, sends 20 simultaneous requests and then
 * a few more, prints what X-Cache and Cache-Status said for each, and stops.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import { Redis } from 'ioredis'
import { createCache } from '../src/index.js' // in your project: from 'stampede-guard'
import { fastifyCache } from '../src/fastify/index.js' // in your project: from 'stampede-guard/fastify'

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
if (!redis) console.log('REDIS_URL is not set: in-process mode')
const cache = createCache({ redis, namespace: 'example-fastify', ttl: '5s' })

let renders = 0
const app = Fastify()
await app.register(fastifyCache, { cache, defaults: { xCacheHeader: true, cacheStatus: 'example' } })
// The response (status, headers, body) is stored; concurrent requests wait for one render.
app.get('/report', { config: { cache: { ttl: '5s', staleTtl: '30s' } } }, async () => {
  renders++
  await sleep(300) // a slow query or render
  return { total: 42, renderedAt: new Date().toISOString() }
})

// Port 0: any free port. The default cache key includes Host, so each run starts cold.
await app.listen({ port: 0, host: '127.0.0.1' })
const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/report`

const status = async () => {
  const { headers } = await fetch(url)
  return `${headers.get('x-cache')} (${headers.get('cache-status')})`
}
const burst = await Promise.all(Array.from({ length: 20 }, status))
const tally = burst.reduce<Record<string, number>>((t, h) => ({ ...t, [h]: (t[h] ?? 0) + 1 }), {})
console.log(`20 simultaneous requests → ${JSON.stringify(tally)}; the handler ran ${renders} time(s)`)
console.log(`3 more requests → ${(await Promise.all([status(), status(), status()])).join(', ')}`)
console.log(`the handler ran ${renders} time(s) in total`)

await app.close()
await cache.close()
await redis?.quit()
if (renders !== 1) throw new Error(`expected one render, got ${renders}`)
