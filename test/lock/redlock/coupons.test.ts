/** The seeds' coupon test across 4 processes on a real PostgreSQL table: Redlock over 5 redis-servers. */
import { afterAll, beforeAll, describe, it } from 'vitest'
import { postgresAvailable } from '../../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { expectNeverOversold, runCouponContest } from '../../support/coupons/harness.js'

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

    it('Redlock over 5 redis-servers: never oversold, issued == decremented', async () => {
      const result = await runCouponContest({
        kind: 'redlock',
        factory: new URL('./coupons-factory.ts', import.meta.url),
        backend: { ports: servers.map((server) => server.port) },
        fence: false, // Redlock issues no token
      })
      expectNeverOversold(result)
    }, 300_000)
  },
)
