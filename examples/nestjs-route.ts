/**
 * A NestJS app that caches a slow route with CacheRouteInterceptor and @CacheRoute, on
 * Nest's Express platform and then on its Fastify platform, sharing one cache.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx --tsconfig tsconfig.nestjs.json examples/nestjs-route.ts
 *
 * (Nest code needs `experimentalDecorators`: tsconfig.nestjs.json sets it.) For each
 * platform it starts the app on a free 127.0.0.1 port, sends 20 simultaneous requests
 * and then a few more, prints what the X-Cache and Cache-Status headers said, and stops.
 */
import 'reflect-metadata'
import { setTimeout as sleep } from 'node:timers/promises'
import { Controller, Get, Module, Param, Put } from '@nestjs/common'
import { NestFactory } from '@nestjs/core'
import { ExpressAdapter } from '@nestjs/platform-express'
import { FastifyAdapter } from '@nestjs/platform-fastify'
import { Redis } from 'ioredis'
import { createCache } from '../src/index.js' // in your project: from 'stampede-guard'
import { CacheRoute, CacheRouteInterceptor, InvalidateTags } from '../src/nestjs/index.js' // 'stampede-guard/nestjs'

const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined
if (!redis) console.log('REDIS_URL is not set: in-process mode')
const cache = createCache({ redis, namespace: 'example', ttl: '5s' })

let renders = 0
@Controller('reports')
class ReportsController {
  @Get(':id')
  @CacheRoute({ ttl: '5s', staleTtl: '30s', xCacheHeader: true, cacheStatus: 'example', tags: ['reports'] })
  async find(@Param('id') id: string) {
    renders++
    await sleep(300) // a slow query or render
    return { id, total: 42, renderedAt: new Date().toISOString() } // sent as JSON, stored as sent
  }

  @Put(':id')
  @InvalidateTags('reports') // a successful write drops every cached report, in every process
  update(@Param('id') id: string) {
    return { id, updated: true }
  }
}

@Module({ controllers: [ReportsController] })
class AppModule {}

for (const platform of ['express', 'fastify'] as const) {
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter()
  const app = await NestFactory.create(AppModule, adapter, { logger: false })
  app.useGlobalInterceptors(new CacheRouteInterceptor(cache))
  await app.listen(0, '127.0.0.1')
  // A fresh id per platform: the default key includes Host and the port, so each run starts cold.
  const url = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/reports/${platform}`
  const before = renders

  const get = async () => (await fetch(url)).headers
  const burst = await Promise.all(Array.from({ length: 20 }, get))
  const tally = burst.reduce<Record<string, number>>((t, h) => {
    const name = String(h.get('x-cache'))
    return { ...t, [name]: (t[name] ?? 0) + 1 }
  }, {})
  console.log(
    `${platform}: 20 simultaneous requests → X-Cache ${JSON.stringify(tally)}; the handler ran ${renders - before} time(s)`,
  )
  const hit = await get()
  await fetch(url, { method: 'PUT' })
  const afterWrite = await get()
  console.log(
    `${platform}: then → X-Cache ${hit.get('x-cache')} (Cache-Status ${hit.get('cache-status')}); after PUT → X-Cache ${afterWrite.get('x-cache')}; the handler ran ${renders - before} time(s) in total`,
  )
  await app.close()
  if (renders - before !== 2)
    throw new Error(`${platform}: expected two renders (cold, after the PUT), got ${renders - before}`)
}

await cache.close()
await redis?.quit()
