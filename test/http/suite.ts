/**
 * Runs the conformance table (cases.ts) through one adapter: one redis-server, one cache
 * and one served app per file, every case under its own path.
 */
import { afterAll, beforeAll, describe, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import type { ConformanceAdapter, NeutralRoute, ServedApp } from './adapter.js'
import { CASES, DEFAULT_OPTIONS } from './cases.js'
import { send } from './client.js'

export function runConformance(adapter: ConformanceAdapter): void {
  describe.skipIf(!redisAvailable)(`conformance: ${adapter.name}`, () => {
    let redis: RedisServer | undefined
    let cache: Cache | undefined
    let app: ServedApp | undefined
    const runs = new Map<string, number>()
    const routes: NeutralRoute[] = []
    CASES.forEach((entry, index) => {
      for (const route of entry.routes()) {
        const path = `/c${index}${route.sub}`
        routes.push({
          path,
          options: route.options ?? DEFAULT_OPTIONS,
          handler: (request) => {
            runs.set(path, (runs.get(path) ?? 0) + 1)
            return route.handler(request)
          },
        })
      }
    })

    beforeAll(async () => {
      redis = await startRedis()
      const client = redis.client({ maxRetriesPerRequest: 1 })
      client.on('error', () => {})
      cache = createCache({ redis: client, namespace: `conformance-${adapter.name}`, ttl: '30s' })
      app = await adapter.serve(cache, routes)
    })
    afterAll(async () => {
      await app?.close()
      await cache?.close()
      await redis?.stop()
    })

    CASES.forEach((entry, index) => {
      const reason = adapter.unsupported?.[entry.name]
      const title = `${entry.group}: ${entry.name}`
      // Listed in the adapter's docs with the reason; shown as todo, never silently skipped.
      if (reason) return it.todo(`${title} (unsupported: ${reason})`)
      it(title, async () => {
        const path = `/c${index}`
        await entry.run({
          path,
          get port() {
            return app!.port
          },
          send: (sub = '', options) => send(app!.port, path + sub, options),
          runs: (sub = '') => runs.get(path + sub) ?? 0,
        })
      })
    })
  })
}
