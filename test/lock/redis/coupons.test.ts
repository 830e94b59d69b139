/** The seeds' coupon test across 4 processes on a real PostgreSQL table: the Redis lock. */
import { afterAll, beforeAll, describe, it } from 'vitest'
import { postgresAvailable } from '../../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { expectNeverOversold, runCouponContest } from '../../support/coupons/harness.js'

describe.skipIf(!redisAvailable || !postgresAvailable)(
  'coupon contest: 1,000 coupons, 1,200 users, 4 processes',
  () => {
    const servers: RedisServer[] = []
    beforeAll(async () => {
      servers.push(await startRedis())
    })
    afterAll(async () => {
      await Promise.all(servers.map((server) => server.stop()))
    })

    it('Redis lock: never oversold, issued == decremented', async () => {
      const result = await runCouponContest({
        kind: 'redis',
        factory: new URL('./coupons-factory.ts', import.meta.url),
        backend: { port: servers[0]!.port },
      })
      expectNeverOversold(result)
    }, 300_000)
  },
)
