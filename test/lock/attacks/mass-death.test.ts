/**
 * A line in which 10,000 waiters died at once (a process with that many waiters on one key
 * SIGKILLed): pruning them all in the next script must not overflow Lua's stack (unpack of
 * thousands of values does), which would fail every acquire and release on that key for as
 * long as the dead beats stay. Planted as the dead process leaves them: queue entries and
 * beats already past.
 */
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { semaphoreKeys } from '../../../src/lock/semaphore/redis/store.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'

describe.skipIf(!redisAvailable)('10,000 waiters dead at once', () => {
  const redis = useRedisServer({ flush: true })
  const NS = 'adv23md'
  const DEAD = 10_000

  async function plantDead(queue: string, beats: string): Promise<void> {
    const past = Date.now() - 1_000
    const pipeline = redis.admin().pipeline()
    for (let i = 0; i < DEAD; i += 1_000) {
      const members = Array.from({ length: 1_000 }, (_, j) => `dead-${i + j}`)
      pipeline.zadd(queue, ...members.flatMap((m, j) => [String(i + j), m]))
      pipeline.zadd(beats, ...members.flatMap((m) => [String(past), m]))
    }
    await pipeline.exec()
  }

  it('fair lock: the next acquire prunes them all and takes the lock', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS, fair: true })
    await plantDead(`${NS}:{l:k}:q`, `${NS}:{l:k}:b`)
    const held = await locks.acquire('k', { lease: 1_000, wait: 2_000 })
    expect(await redis.admin().zcard(`${NS}:{l:k}:q`)).toBe(0)
    await held.release()
    await locks.close()
  })

  it('semaphore: the next acquire prunes them all and takes the permit', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS })
    const keys = semaphoreKeys(NS, 's')
    await plantDead(keys.queue, keys.beats)
    const held = await locks.semaphore('s', { permits: 2 }).acquire(1, { lease: 1_000, wait: 2_000 })
    expect(await redis.admin().zcard(keys.queue)).toBe(0)
    await held.release()
    await locks.close()
  })
})
