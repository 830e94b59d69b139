/**
 * A fair waiter that gives up at the moment the lock is handed to it (its abort and the
 * holder's release in the same turn, in either order, or a turn apart): the lock it may have
 * been handed must go on to the next in line at once, not sit out the handed lease. Also a
 * waiter whose wait runs out as the hand-off comes. Counted over rounds against a 5 s lease.
 */
import { describe, expect, it } from 'vitest'
import { createLocks, LockBusyError } from '../../../src/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('fair: a waiter leaving as the lock is handed to it', () => {
  const redis = useRedisServer({ flush: true })
  const NS = 'adv23ab'
  const inLine = (key: string) => redis.admin().zcard(`${NS}:{l:${key}}:q`)
  const LEASE = 5_000

  type Order = 'abort-then-release' | 'release-then-abort' | 'release-turn-abort' | 'release-1ms-abort'

  async function round(key: string, order: Order): Promise<{ nextWaitedMs: number; leaverGot: boolean }> {
    const a = createLocks({ redis: redis.client(), namespace: NS, fair: true })
    const b = createLocks({ redis: redis.client(), namespace: NS, fair: true })
    const holder = await a.acquire(key, { lease: LEASE })
    const leaving = new AbortController()
    const leaver = b.acquire(key, { lease: LEASE, wait: 10_000, signal: leaving.signal }).then(
      async (held) => (await held.release(), true),
      () => false,
    )
    await until(async () => (await inLine(key)) === 1, 'the leaver in line', 3_000)
    const next = a.acquire(key, { lease: LEASE, wait: 10_000 })
    await until(async () => (await inLine(key)) === 2, 'the next in line', 3_000)
    const startedAt = performance.now()
    if (order === 'abort-then-release') {
      leaving.abort()
      void holder.release()
    } else {
      void holder.release()
      if (order === 'release-then-abort') leaving.abort()
      else if (order === 'release-turn-abort') setImmediate(() => leaving.abort())
      else setTimeout(() => leaving.abort(), 1)
    }
    const held = await next
    const nextWaitedMs = performance.now() - startedAt
    await held.release()
    const leaverGot = await leaver
    await Promise.all([a.close(), b.close()])
    return { nextWaitedMs, leaverGot }
  }

  // The bug this guards against leaves the lock to its 5 s lease; half of it is the bound, so a
  // hand-off slowed by a busy 2-core machine is not mistaken for it.
  it('in every order, the next in line has the lock within half the 5 s lease, and the line ends empty', async () => {
    const orders: Order[] = ['abort-then-release', 'release-then-abort', 'release-turn-abort', 'release-1ms-abort']
    const slow: string[] = []
    for (let i = 0; i < 40; i++) {
      const order = orders[i % orders.length]!
      const { nextWaitedMs } = await round(`k${i}`, order)
      if (nextWaitedMs > 2_500) slow.push(`${order}: ${Math.round(nextWaitedMs)} ms`)
      expect(await inLine(`k${i}`)).toBe(0)
      expect(await redis.admin().exists(`${NS}:{l:k${i}}:lock`)).toBe(0)
    }
    expect(slow).toEqual([])
  }, 120_000)

  it('a waiter whose wait runs out as the hand-off comes: LockBusyError or the lock, never a lock left behind', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: NS, fair: true })
    const outcomes = { busy: 0, held: 0 }
    for (let i = 0; i < 20; i++) {
      const key = `w${i}`
      const holder = await locks.acquire(key, { lease: LEASE })
      const waiter = locks.acquire(key, { lease: LEASE, wait: 60 }).then(
        async (held) => (await held.release(), 'held' as const),
        (error: unknown) => (expect(error).toBeInstanceOf(LockBusyError), 'busy' as const),
      )
      await sleep(55 + (i % 10))
      await holder.release()
      outcomes[await waiter]++
      await until(async () => (await redis.admin().exists(`${NS}:{l:${key}}:lock`)) === 0, 'the lock free', 2_500)
      expect(await inLine(key)).toBe(0)
    }
    expect(outcomes.busy + outcomes.held).toBe(20)
    await locks.close()
  }, 60_000)
})
