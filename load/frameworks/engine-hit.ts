/**
 * `npx tsx load/frameworks/engine-hit.ts`: the CPU time of one L1 hit through the HTTP
 * engine (`HttpCacheRoute.serve()`), in process, with no HTTP server and no framework: what
 * every adapter's hit pays before its framework sends the answer. An in-process cache (no
 * Redis); the route's response is the framework run's 50-row page. Prints µs of CPU per
 * hit for 5 rounds of HIT_COUNT hits (default 100,000): compare runs back to back.
 */
import { createCache } from '../../src/index.js'
import type { HeaderList } from '../../src/http/headers.js'
import type { HttpRequest } from '../../src/http/request.js'
import { HttpCacheRoute } from '../../src/http/route.js'
import { page } from './apps.js'

const hits = Number(process.env.HIT_COUNT ?? 100_000)
const cache = createCache({ ttl: '10m' })
const route = new HttpCacheRoute<null>(cache, { ttl: '10m' })
const body = Buffer.from(JSON.stringify(page()))
const headers: HeaderList = [
  ['Content-Type', 'application/json; charset=utf-8'],
  ['Content-Length', String(body.length)],
]
let handlerRuns = 0
const origin = () => {
  handlerRuns++
  return Promise.resolve({ status: 200, headers, body })
}
// A new request each time, as a framework hands the engine one per request.
const request = (): HttpRequest => ({
  method: 'GET',
  url: '/cached',
  headers: { host: '127.0.0.1:3000', 'user-agent': 'autocannon', accept: '*/*' },
  scheme: 'http',
})

const first = await route.serve(null, request(), origin) // stores the page
if (first.status !== 200) throw new Error(`the first request answered ${first.status}`)
for (let round = 0; round < 5; round++) {
  const before = process.cpuUsage()
  for (let i = 0; i < hits; i++) await route.serve(null, request(), origin)
  const used = process.cpuUsage(before)
  console.log(`round ${round + 1}: ${((used.user + used.system) / hits).toFixed(2)} µs CPU per hit`)
}
// Every measured request was a hit: the handler ran for the first one only.
if (handlerRuns !== 1) throw new Error(`the handler ran ${handlerRuns} times`)
await cache.close()
