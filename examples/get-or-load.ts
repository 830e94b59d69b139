/**
 * Example 1: wrap an expensive async function with getOrLoad.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/get-or-load.ts
 *
 * 50 callers ask for the same value at the same moment; the expensive function runs
 * once. Without REDIS_URL the cache runs in-process (same result within one process).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createCache } from '../src/index.js' // in your project: from 'stampede-guard'

// The expensive thing: a slow API call, a heavy SQL query, a template render...
let calls = 0
async function fetchExchangeRates(base: string): Promise<{ base: string; usd: number; fetchedAt: string }> {
  calls++
  await sleep(200)
  return { base, usd: 1.08, fetchedAt: new Date().toISOString() }
}

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
if (!redis) console.log('REDIS_URL is not set: in-process mode (L1 + single-flight, nothing shared between processes)')

const cache = createCache({
  redis,
  namespace: 'example',
  ttl: '10s', // fresh for 10 s; then the next caller reloads it (one caller, not all of them)
})

// Start from a clean slate, so a previous run's value does not answer for us.
await cache.delete('rates:EUR')

// 50 concurrent callers, as 50 simultaneous HTTP requests would be.
const started = performance.now()
const answers = await Promise.all(
  Array.from({ length: 50 }, () => cache.getOrLoad('rates:EUR', () => fetchExchangeRates('EUR'))),
)
console.log(
  `50 concurrent callers got ${answers[0]!.usd} in ${Math.round(performance.now() - started)} ms; fetchExchangeRates ran ${calls} time(s)`,
)

// Later callers are served from the cache: still one call.
const again = await cache.getOrLoad('rates:EUR', () => fetchExchangeRates('EUR'))
console.log(
  `a later caller got the value fetched at ${again.fetchedAt}; fetchExchangeRates ran ${calls} time(s) in total`,
)
const counters = Object.entries(cache.stats()).filter(([, n]) => n > 0)
console.log(`cache counters: ${counters.map(([name, n]) => `${name}=${n}`).join(' ')}`)

await cache.close() // waits for loads in flight; the Redis client stays yours
await redis?.quit()
if (calls !== 1) throw new Error(`expected exactly one call, got ${calls}`)
