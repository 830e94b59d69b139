/**
 * A Koa app that caches a slow route with the cacheRoute middleware.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/koa-route.ts
 *
 * It starts the app on a free 127.0.0.1 port, sends 20 simultaneous requests and then
 * a few more, prints what the X-Cache and Cache-Status headers said for each, and stops.
 */
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import Koa from 'koa'
import { Redis } from 'ioredis'
import { createCache } from '../src/index.js' // in your project: from 'stampede-guard'
import { cacheRoute } from '../src/koa/index.js' // in your project: from 'stampede-guard/koa'

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
if (!redis) console.log('REDIS_URL is not set: in-process mode')
const cache = createCache({ redis, namespace: 'example', ttl: '5s' })

let renders = 0
const app = new Koa()
// The response (status, headers, body) is stored; concurrent requests wait for one render.
app.use(cacheRoute(cache, { ttl: '5s', staleTtl: '30s', xCacheHeader: true, cacheStatus: 'example' }))
app.use(async (ctx) => {
  if (ctx.path !== '/report') return
  renders++
  await sleep(300) // a slow query or render
  ctx.body = { total: 42, renderedAt: new Date().toISOString() } // JSON
})

// Port 0: any free port. The default cache key includes Host, so each run starts cold.
const server = app.listen(0, '127.0.0.1')
await new Promise((resolve) => server.once('listening', resolve))
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/report`

const get = async () => (await fetch(url)).headers
const burst = await Promise.all(Array.from({ length: 20 }, get))
const tally = burst.reduce<Record<string, number>>((t, h) => {
  const name = String(h.get('x-cache'))
  return { ...t, [name]: (t[name] ?? 0) + 1 }
}, {})
console.log(`20 simultaneous requests → X-Cache ${JSON.stringify(tally)}; the handler ran ${renders} time(s)`)
const more = await Promise.all([get(), get(), get()])
console.log(
  `3 more requests → X-Cache ${more.map((h) => h.get('x-cache')).join(', ')}; Cache-Status ${more[0]!.get('cache-status')}; the handler ran ${renders} time(s) in total`,
)

server.close()
await cache.close()
await redis?.quit()
if (renders !== 1) throw new Error(`expected one render, got ${renders}`)
