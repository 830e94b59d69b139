/**
 * Acceptance for every adapter: 4 worker processes, each serving every adapter's app on
 * one Redis (fixtures/adapters-worker.ts). A 20-request burst on a cold URL, spread over
 * the 4 processes, runs the handler once (counted in Redis); an entry stored through one
 * adapter is served by every other (one stored form).
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { forkWorker, type Worker } from '../support/workers.js'
import { adapters } from './apps/index.js'
import { send } from './client.js'

const WORKERS = 4

describe.skipIf(!redisAvailable)('every adapter across 4 processes', () => {
  let server: RedisServer
  let redis: Redis
  let workers: Worker[] = []
  let ports: Array<Record<string, number>> = []

  beforeAll(async () => {
    server = await startRedis()
    redis = server.client()
    workers = await Promise.all(
      Array.from({ length: WORKERS }, () =>
        forkWorker(new URL('./fixtures/adapters-worker.ts', import.meta.url), {
          env: { REDIS_URL: server.url, NAMESPACE: 'cross' },
        }),
      ),
    )
    ports = await Promise.all(workers.map((worker) => worker.request<Record<string, number>>({ op: 'ports' })))
  }, 120_000)
  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop()))
    await server?.stop()
  })

  for (const adapter of adapters) {
    it(`${adapter.name}: a 20-request burst on a cold URL from 4 processes runs the handler once`, async () => {
      const path = `/burst/${adapter.name}`
      const replies = await Promise.all(
        Array.from({ length: 20 }, (_, i) => send(ports[i % WORKERS]![adapter.name]!, path)),
      )
      expect(replies.map((r) => [r.status, r.body.toString()])).toEqual(Array(20).fill([200, 'cold page']))
      expect(Number(await redis.get(`runs:${path}`))).toBe(1)
    })
  }

  for (const storer of adapters) {
    it(`an entry stored through ${storer.name} is served by every other adapter, in other processes`, async () => {
      const path = `/shared/${storer.name}`
      const stored = await send(ports[0]![storer.name]!, path)
      expect([stored.status, stored.headers['x-cache'], stored.body.toString()]).toEqual([
        200,
        'MISS',
        `made by ${storer.name}`,
      ])
      for (const [index, other] of adapters.filter((a) => a !== storer).entries()) {
        const port = ports[(index + 1) % WORKERS]![other.name]!
        const served = await send(port, path)
        expect([served.status, served.headers['x-cache'], served.body.toString()], other.name).toEqual([
          200,
          'HIT',
          `made by ${storer.name}`,
        ])
        expect([served.headers.etag, served.headers['content-type']], other.name).toEqual(['"s1"', 'text/plain'])
        const notModified = await send(port, path, { headers: { 'if-none-match': '"s1"' } })
        expect(notModified.status, other.name).toBe(304)
      }
      expect(Number(await redis.get(`runs:${path}`))).toBe(1)
    })
  }
})
