/**
 * The child of `npm run bench:capture-memory`: one Express app whose route returns a
 * large body written over about a second, with or without cacheRoute (MODE), so each
 * measurement is one fresh process. It samples its own memory every 10 ms and reports
 * the peaks, the event-loop delay and what is left after a GC over IPC.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'
import express, { type RequestHandler } from 'express'
import { Redis } from 'ioredis'
import * as routeCache from '../../src/express/index.js'
import { createCache } from '../../src/index.js'

const mode = process.env.MODE as 'none' | 'cacheRoute' | 'cacheRoute, L1 64'
const bodyBytes = Number(process.env.BODY_KIB) * 1024
const chunks = Number(process.env.CHUNKS)
const writeMs = Number(process.env.WRITE_MS)

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const handler: RequestHandler = async (req, res) => {
  res.type('application/octet-stream')
  const chunk = Buffer.alloc(Math.ceil(bodyBytes / chunks), String(req.params.id).slice(-1))
  // --write-ms 0: write as fast as the response takes it, waiting only for 'drain' (the
  // small-writes case: 10 MiB in 1-byte writes).
  if (writeMs === 0) {
    for (let i = 0; i < chunks; i++) {
      const last = i === chunks - 1
      if (!res.write(last ? chunk.subarray(0, bodyBytes - chunk.length * (chunks - 1)) : chunk))
        await new Promise((resolve) => res.once('drain', resolve))
    }
    res.end()
    return
  }
  for (let i = 0; i < chunks; i++) {
    res.write(i === chunks - 1 ? chunk.subarray(0, bodyBytes - chunk.length * (chunks - 1)) : chunk)
    await sleep(writeMs / chunks)
  }
  res.end()
}

const app = express()
let redis: Redis | undefined
if (mode !== 'none') {
  redis = new Redis(process.env.REDIS_URL!)
  // 'L1 64': L1 holds at most 64 entries (~56 MiB of these bodies), a stand-in for the byte
  // bound on L1 that another issue adds; by default L1 keeps every stored response.
  const l1 = mode === 'cacheRoute, L1 64' ? { l1: { max: 64 } } : {}
  const cache = createCache({ redis, ttl: '5m', namespace: `capture-memory-${process.pid}`, ...l1 })
  app.get('/item/:id', routeCache.cacheRoute(cache, { ttl: '5m', xCacheHeader: true }), handler)
} else {
  app.get('/item/:id', handler)
}

const peaks = { rss: 0, heapUsed: 0, external: 0 }
const sample = () => {
  const usage = process.memoryUsage()
  peaks.rss = Math.max(peaks.rss, usage.rss)
  peaks.heapUsed = Math.max(peaks.heapUsed, usage.heapUsed)
  peaks.external = Math.max(peaks.external, usage.external + usage.arrayBuffers)
}
const sampler = setInterval(sample, 10)
const loop = monitorEventLoopDelay({ resolution: 10 })

const server = app.listen(0, '127.0.0.1', () => {
  const baseline = process.memoryUsage().rss
  process.send!({ kind: 'ready', port: (server.address() as { port: number }).port, baselineRss: baseline })
})
process.on('message', async (message: { kind: string }) => {
  if (message.kind === 'start') {
    loop.enable()
    return
  }
  if (message.kind !== 'report') return
  loop.disable()
  sample()
  clearInterval(sampler)
  global.gc?.()
  await sleep(50)
  global.gc?.()
  const budget = (routeCache as { DEFAULT_CAPTURE_BUDGET_BYTES?: number }).DEFAULT_CAPTURE_BUDGET_BYTES
  process.send!({
    kind: 'report',
    peakRss: peaks.rss,
    peakHeapUsed: peaks.heapUsed,
    peakExternal: peaks.external,
    rssAfterGc: process.memoryUsage().rss,
    loopP99Ms: loop.percentile(99) / 1e6,
    budgetBytes: mode === 'none' ? 0 : (budget ?? null),
  })
  server.close()
  redis?.disconnect()
  setTimeout(() => process.exit(0), 100).unref()
})
