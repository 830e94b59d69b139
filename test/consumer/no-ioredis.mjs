// Run by scripts/consumer-check.sh with ioredis uninstalled: a cache without Redis
// (and the Express and Koa middleware) must work without it.
import { createCache } from 'stampede-guard'
import { cacheRoute } from 'stampede-guard/express'
// koa is not installed either: its entry imports nothing of Koa's at run time.
import { cacheRoute as koaCacheRoute } from 'stampede-guard/koa'

const cache = createCache({ ttl: '1m' })
cacheRoute(cache, { ttl: '10s' })
koaCacheRoute(cache, { ttl: '10s' })
let loads = 0
await cache.getOrLoad('k', async () => ++loads)
await cache.getOrLoad('k', async () => ++loads)
await cache.close()
console.log(`in-process: ${loads} load(s) for 2 calls, without ioredis installed`)
if (loads !== 1) process.exit(1)
