/**
 * Example 5: an Express app whose cache reports to Prometheus at GET /metrics.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/express-metrics.ts
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/express-metrics.ts --serve [--port 3000]
 *   npm run metrics -- http://127.0.0.1:3000/metrics --every 2s     # while --serve runs
 *
 * Without --serve it sends a scripted burst of requests, scrapes its own /metrics the
 * way `npm run metrics` does, prints the hit ratio and exits. With --serve it keeps
 * serving GET /products/:id and GET /metrics on 127.0.0.1 until interrupted.
 */
import type { AddressInfo } from 'node:net'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import express from 'express'
import { Redis } from 'ioredis'
import { createCache } from '../src/index.js' // in your project: from 'stampede-guard'
import { cacheRoute } from '../src/express/index.js' // in your project: from 'stampede-guard/express'
import { instrument } from '../src/observability/index.js' // in your project: from 'stampede-guard/otel'

const { values: args } = parseArgs({ options: { serve: { type: 'boolean' }, port: { type: 'string' } } })
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
if (!redis) console.log('REDIS_URL is not set: in-process mode')

// The exporter renders the metrics; the app's own Express serves them (no second HTTP server on 9464).
const exporter = new PrometheusExporter({ preventServerStart: true })
const meterProvider = new MeterProvider({ readers: [exporter] })

const cache = createCache({ redis, namespace: 'example-metrics', ttl: '5s' })
instrument(cache, {
  meter: meterProvider.getMeter('stampede-guard'),
  // Opt-in and low-cardinality: the route, never the key (a key holds the URL).
  keyLabel: (key) => (key.includes('/products/') ? 'products' : 'other'),
})

let renders = 0
const app = express()
app.get('/metrics', (req, res) => exporter.getMetricsRequestHandler(req, res))
app.get('/products/:id', cacheRoute(cache, { ttl: '5s', xCacheHeader: true }), async (req, res) => {
  renders++
  await sleep(100) // a slow query
  res.json({ id: req.params.id, priceCents: 2500 })
})

const server = app.listen(args.serve ? Number(args.port ?? 3000) : 0, '127.0.0.1')
await new Promise((resolve) => server.once('listening', resolve))
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

if (args.serve) {
  console.log(`serving ${base}/products/:id and ${base}/metrics; try: npm run metrics -- ${base}/metrics --every 2s`)
  const stop = async () => {
    server.close()
    await cache.close()
    await redis?.quit()
    await meterProvider.shutdown()
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
} else {
  const get = (path: string) => fetch(base + path).then((res) => res.text())
  await Promise.all(Array.from({ length: 20 }, () => get('/products/1'))) // 1 render; the others join it (coalesced)
  for (let i = 0; i < 10; i++) await get('/products/1') // 10 L1 hits
  await Promise.all(Array.from({ length: 5 }, () => get('/products/2'))) // 1 render, 4 coalesced
  const counts = countsFromScrape(await get('/metrics'))
  // Served by the cache: every request that did not run the handler, coalesced ones included
  // (they waited for the one render in flight instead of running their own).
  const served = counts.l1Hits + counts.redisHits + counts.stale + counts.coalesced
  const lookups = served + counts.misses
  console.log(
    `${lookups} requests, ${renders} renders; GET /metrics → ${served} served by the cache ` +
      `(${((served / lookups) * 100).toFixed(1)} %: hits ${counts.l1Hits} L1 + ${counts.redisHits} Redis, ` +
      `stale ${counts.stale}, coalesced ${counts.coalesced}), misses ${counts.misses}; loads ${counts.loads}`,
  )
  server.close()
  await cache.close()
  await redis?.quit()
  await meterProvider.shutdown()
  // Each request is one lookup, counted once: a hit, a caller that joined the render in flight, or a miss.
  if (renders !== 2 || counts.misses !== 2 || lookups !== 35)
    throw new Error(`expected 2 renders, 2 misses and 35 lookups, got ${renders}, ${counts.misses} and ${lookups}`)
}

/** The cache's counters in one Prometheus scrape, summed over their other labels. */
function countsFromScrape(text: string) {
  const sum = (family: string, where: (labels: string) => boolean = () => true) => {
    let total = 0
    for (const line of text.split('\n')) {
      const match = new RegExp(`^${family}(?:\\{(.*)\\})? ([0-9.e+-]+)$`).exec(line)
      if (match && where(match[1] ?? '')) total += Number(match[2])
    }
    return total
  }
  return {
    l1Hits: sum('stampede_guard_cache_hits_total', (labels) => labels.includes('stampede_guard_tier="l1"')),
    redisHits: sum('stampede_guard_cache_hits_total', (labels) => !labels.includes('stampede_guard_tier="l1"')),
    stale: sum('stampede_guard_cache_stale_total'),
    coalesced: sum('stampede_guard_cache_coalesced_total'),
    misses: sum('stampede_guard_cache_misses_total'),
    loads: sum('stampede_guard_cache_loads_total'),
  }
}
