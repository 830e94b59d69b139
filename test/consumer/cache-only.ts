// Type-checked with --listFiles by scripts/consumer-check.sh: a user of the cache and the
// middleware who passes no Redis client must not load any ioredis type.
import { createCache } from 'stampede-guard'
import { cacheRoute } from 'stampede-guard/express'

const cache = createCache({ ttl: '1m' })
export const handler = cacheRoute(cache, { ttl: '10s' })
export const value: Promise<{ at: Date }> = cache.getOrLoad('k', async () => ({ at: new Date() }))

// The Hono/fetch entry imports nothing from hono: it compiles and runs without it.
import { cacheFetch } from 'stampede-guard/hono'
export const cachedFetch: (request: Request) => Promise<Response> = cacheFetch(
  cache,
  { ttl: '10s' },
  () => new Response('ok'),
)
