// Type-checked by scripts/consumer-check.sh in a throwaway project that installed the packed
// tarball, ioredis 5 and no optional peer, with skipLibCheck: false. It imports the published
// package, not src/, so the repository's own typecheck leaves test/consumer/ out.
import { Redis } from 'ioredis'
import { createCache, createLocks, jsonCodec, type Cache, type Codec } from 'stampede-guard'
import { cacheRoute, type CacheRouteOptions } from 'stampede-guard/express'
import { cacheRoute as koaCacheRoute, type KoaCacheRouteOptions } from 'stampede-guard/koa'
import { CacheRoute, CacheRouteInterceptor, InvalidateTags } from 'stampede-guard/nestjs'

interface Row {
  id: number
  updatedAt: Date
}

const redis = new Redis({ lazyConnect: true })
const cache: Cache = createCache({ redis, ttl: '5m' })
const row: Promise<Row | null> = cache.getOrLoad('row:1', async () => ({ id: 1, updatedAt: new Date() }))
const inProcess = createCache({ ttl: 1_000, codec: jsonCodec satisfies Codec })

const options: CacheRouteOptions = { ttl: '10s', key: (req) => `${req.method} ${req.originalUrl}` }
const middleware = cacheRoute(cache, options)
middleware.length satisfies number

// Koa and Nest are not installed here: their entries' types compile without them.
const koaOptions: KoaCacheRouteOptions = { ttl: '10s', key: (ctx) => ctx.originalUrl }
koaCacheRoute(cache, koaOptions).length satisfies number
const interceptor = new CacheRouteInterceptor(cache, { staleTtl: '1m' })
const decorators = [CacheRoute({ ttl: '10s', tags: (req) => [`p:${String(req.params.id)}`] }), InvalidateTags('p')]

const locks = createLocks({ redis })
const ran: Promise<number> = locks.withLock('job', async (lock) => {
  lock.token satisfies bigint
  return 1
})

export { row, inProcess, ran, interceptor, decorators }
