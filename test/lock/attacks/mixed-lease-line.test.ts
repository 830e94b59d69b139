/**
 * A line (fair lock or semaphore) shared by waiters with different leases: a waiter with a
 * short lease that joins and leaves must not take the line's keys down with it. Each
 * waiter's place is kept for its own beat; the keys' expiry only ever grows to cover the
 * longest beat in line, so a long-lease waiter keeps its place and is served before
 * whoever joined after it.
 */
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { semaphoreKeys } from '../../../src/lock/semaphore/redis/store.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('a line of waiters with mixed leases', () => {
  const redis = useRedisServer({ flush: true })
  const NS = 'adv23ml'

  /**
   * `first` waits (5 s lease), `short` joins with a 30 ms lease and gives up, then 150 ms
   * (> 2 × 30 ms) pass, then `second` joins; the holder releases. Returns who was served
   * in which order, and how many were in line after the short waiter left and time passed.
   */
  async function scenario(
    inLine: () => Promise<number>,
    hold: () => Promise<{ release(): Promise<void> }>,
    wait: (lease: number, signal?: AbortSignal) => Promise<{ release(): Promise<void> }>,
  ): Promise<{ order: string[]; lineAfterShortLeft: number }> {
    const holder = await hold()
    const order: string[] = []
    const served = (name: string, lease: number, signal?: AbortSignal) =>
      wait(lease, signal).then(async (held) => {
        order.push(name)
        await held.release()
      })
    const first = served('first', 5_000)
    await until(async () => (await inLine()) === 1, 'first in line', 3_000)
    const gaveUp = new AbortController()
    const short = served('short', 30, gaveUp.signal).catch(() => {})
    await until(async () => (await inLine()) === 2, 'short in line', 3_000)
    await sleep(40) // it beats (every 10 ms) a few times
    gaveUp.abort()
    await short
    await until(async () => (await inLine()) === 1, 'short to leave', 3_000)
    await sleep(150)
    const lineAfterShortLeft = await inLine()
    const second = served('second', 5_000)
    await until(async () => (await inLine()) >= lineAfterShortLeft + 1, 'second in line', 3_000)
    await holder.release()
    await Promise.all([first, second])
    return { order, lineAfterShortLeft }
  }

  it('fair lock: a 30 ms-lease waiter that leaves does not expire the place of a 5 s-lease waiter ahead of it', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS, fair: true })
    const result = await scenario(
      () => redis.admin().zcard(`${NS}:{l:k}:q`),
      () => locks.acquire('k', { lease: 5_000 }),
      (lease, signal) => locks.acquire('k', { lease, wait: 5_000, signal }),
    )
    expect(result).toEqual({ order: ['first', 'second'], lineAfterShortLeft: 1 })
    await locks.close()
  })

  it('semaphore: a 30 ms-lease waiter that leaves does not expire the place of a 5 s-lease waiter ahead of it', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS })
    const sem = locks.semaphore('s', { permits: 1 })
    const result = await scenario(
      () => redis.admin().zcard(semaphoreKeys(NS, 's').queue),
      () => sem.acquire(1, { lease: 5_000 }),
      (lease, signal) => sem.acquire(1, { lease, wait: 5_000, signal }),
    )
    expect(result).toEqual({ order: ['first', 'second'], lineAfterShortLeft: 1 })
    await locks.close()
  })
})
