/**
 * A line whose entries lost their beats: the `:b` key evicted (maxmemory) or replaced by a
 * foreign type (which the scripts delete) while `:q` survives, or a beat planted at +inf.
 * Such a waiter can never be found dead by its beat; left at the head, it would block the
 * fair lock (and its release would fail on the missing beat) or the semaphore's line for
 * as long as live waiters keep the line's keys alive. It must be dropped instead.
 */
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { semaphoreKeys } from '../../../src/lock/semaphore/redis/store.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'

describe.skipIf(!redisAvailable)('a line whose head has no usable beat', () => {
  const redis = useRedisServer({ flush: true })
  const NS = 'adv23bl'

  /** Plants `ghost-a` (no beat) and `ghost-b` (beat at +inf) at the head of a line. */
  async function plantGhosts(queue: string, beats: string): Promise<void> {
    const admin = redis.admin()
    await admin.zadd(queue, 1, 'ghost-a', 2, 'ghost-b')
    await admin.zadd(beats, '+inf', 'ghost-b')
    await admin.pexpire(queue, 60_000)
    await admin.pexpire(beats, 60_000)
  }

  it('fair lock: ghosts at the head are dropped; a waiter gets the free lock, and a release with a ghost behind it works', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS, fair: true })
    const queue = `${NS}:{l:k}:q`
    await plantGhosts(queue, `${NS}:{l:k}:b`)
    const held = await locks.acquire('k', { lease: 300, wait: 2_000 })
    expect(await redis.admin().zcard(queue)).toBe(0)
    // A ghost planted behind a live holder: its release hands nothing to it and does not fail.
    await plantGhosts(queue, `${NS}:{l:k}:b`)
    await held.release()
    expect(await redis.admin().exists(`${NS}:{l:k}:lock`)).toBe(0)
    const again = await locks.acquire('k', { lease: 300, wait: 2_000 })
    await again.release()
    await locks.close()
  })

  it('semaphore: ghosts at the head are dropped; a waiter gets the free permit', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS })
    const keys = semaphoreKeys(NS, 's')
    await plantGhosts(keys.queue, keys.beats)
    const sem = locks.semaphore('s', { permits: 1 })
    const held = await sem.acquire(1, { lease: 300, wait: 2_000 })
    expect(await redis.admin().zcard(keys.queue)).toBe(0)
    await held.release()
    await locks.close()
  })
})

describe.skipIf(!redisAvailable)('a semaphore permit that could never expire', () => {
  const redis = useRedisServer({ flush: true })
  const NS = 'adv23inf'

  it('a permit planted at +inf, or past now + 2^32 ms (twice the longest lease), is freed, not held forever', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS })
    const keys = semaphoreKeys(NS, 's')
    const farFuture = Date.now() + 2 ** 32 + 60_000
    await redis.admin().zadd(keys.holders, '+inf', 'ghost-a:0', farFuture, 'ghost-b:0')
    const sem = locks.semaphore('s', { permits: 2 })
    const held = await sem.acquire(2, { lease: 300, wait: 1_000 })
    expect(await redis.admin().zcard(keys.holders)).toBe(2)
    await held.release()
    expect(await redis.admin().zcard(keys.holders)).toBe(0)
    await locks.close()
  })

  it('a permit and a waiter on the longest lease (2^31-1 ms) are kept: not taken for planted ones', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS })
    const keys = semaphoreKeys(NS, 'max')
    const sem = locks.semaphore('max', { permits: 1 })
    const longest = 2 ** 31 - 1
    const held = await sem.acquire(1, { lease: longest })
    const gaveUp = new AbortController()
    const waiting = sem.acquire(1, { lease: longest, wait: 5_000, signal: gaveUp.signal }).catch(() => undefined)
    await expect.poll(() => redis.admin().zcard(keys.queue), { timeout: 3_000 }).toBe(1)
    // Others' attempts prune: neither the permit nor the waiter's place goes.
    for (let i = 0; i < 3; i++) expect(await sem.tryAcquire(1)).toBeUndefined()
    expect(await redis.admin().zcard(keys.holders)).toBe(1)
    expect(await redis.admin().zcard(keys.queue)).toBe(1)
    gaveUp.abort()
    await waiting
    await held.release()
    await locks.close()
  })
})
