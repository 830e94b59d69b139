/** Coupon contest factory: the Redis lock. Config: `{ port }` of a redis-server the test started. */
import { Redis } from 'ioredis'
import { createLocks } from '../../../../src/index.js'

export default async function redisLocks(config: { port: number }) {
  const redis = new Redis({ host: '127.0.0.1', port: config.port })
  const locks = createLocks({ redis, namespace: 'coupons' })
  return {
    locks,
    async close() {
      await locks.close()
      redis.disconnect()
    },
  }
}
