/** The seeds' coupon test across 4 processes on a real PostgreSQL table: Redis lock and Redlock. */
import { afterAll, beforeAll, describe, it } from 'vitest'
import { postgresAvailable } from '../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { expectNeverOversold, runCouponContest } from './coupons/harness.js'

describe.skipIf(!redisAvailable || !postgresAvailable)(
  'coupon contest: 1,000 coupons, 1,200 users, 4 processes',
  () => {
    const servers: RedisServer[] = []
    beforeAll(async () => {
      servers.push(...(await Promise.all(Array.from({ length: 5 }, () => startRedis()))))
    })
    afterAll(async () => {
      await Promise.all(servers.map((server) => server.stop()))
    })

    it('Redis lock: never oversold, issued == decremented', async () => {
      const result = await runCouponContest({
        kind: 'redis',
        factory: new URL('./coupons/factories/redis.ts', import.meta.url),
        backend: { port: servers[0]!.port },
      })
      expectNeverOversold(result)
    }, 300_000)

    it('Redlock over 5 redis-servers: never oversold, issued == decremented', async () => {
      const result = await runCouponContest({
        kind: 'redlock',
        factory: new URL('./coupons/factories/redlock.ts', import.meta.url),
        backend: { ports: servers.map((server) => server.port) },
        fence: false, // Redlock issues no token
      })
      expectNeverOversold(result)
    }, 300_000)
  },
)
