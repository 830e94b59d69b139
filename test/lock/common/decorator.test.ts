/** @locked, the TC39 method decorator, on a class against a real redis-server. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, InvalidArgumentError, locked, type Locks } from '../../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'

describe.skipIf(!redisAvailable)('@locked', () => {
  let server: RedisServer
  let locks: Locks
  beforeAll(async () => {
    server = await startRedis()
    locks = createLocks({ redis: server.client(), namespace: 'decorated' })
  })
  afterAll(async () => {
    await locks?.close()
    await server?.stop()
  })

  class CouponService {
    inside = new Map<number, number>()
    maxInside = new Map<number, number>()
    issued: string[] = []
    constructor(readonly locks: Locks) {}

    @locked((_userId: number, couponId: number) => `coupon:${couponId}`, { wait: '10s' })
    async issue(userId: number, couponId: number): Promise<string> {
      const now = (this.inside.get(couponId) ?? 0) + 1
      this.inside.set(couponId, now)
      this.maxInside.set(couponId, Math.max(now, this.maxInside.get(couponId) ?? 0))
      await new Promise((resolve) => setTimeout(resolve, 5)) // a critical section that yields
      const held = await this.locks.acquire(`coupon:${couponId}`, { reentrant: true }) // the lock we are in
      this.issued.push(`${userId}:${couponId}:${held.token}`)
      this.inside.set(couponId, now - 1)
      return `coupon ${couponId} for user ${userId}`
    }
  }

  it('serialises calls with the same key, and lets calls with different keys run side by side', async () => {
    const service = new CouponService(locks)
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => service.issue(i, i % 2)))
    expect(results[3]).toBe('coupon 1 for user 3')
    expect(service.maxInside.get(0)).toBe(1)
    expect(service.maxInside.get(1)).toBe(1)
    expect(service.issued).toHaveLength(20)
    // Each call saw its own lock's token (reentrant acquire inside the method): 20 distinct tokens.
    expect(new Set(service.issued.map((entry) => entry.split(':')[2])).size).toBe(20)
  })

  it('takes the Locks from { locks } when the instance has none, and says so when there is neither', async () => {
    class Job {
      runs = 0
      @locked(() => 'job', { locks: () => locks, wait: 0 })
      async run(): Promise<number> {
        return ++this.runs
      }
      @locked(() => 'orphan')
      async orphan(): Promise<void> {}
    }
    const job = new Job()
    expect(await job.run()).toBe(1)
    const error = await job.orphan().catch((e: unknown) => e)
    expect(error).toBeInstanceOf(InvalidArgumentError)
    expect((error as InvalidArgumentError).argument).toBe('locks')
  })
})
