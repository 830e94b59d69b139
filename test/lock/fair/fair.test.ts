/**
 * The `fair` option in one process: validation (a boolean; refused by a backend with no
 * promised order, before anything is sent), FIFO among local waiters, `tryAcquire` does not
 * pass the line, a wait that gives up leaves it, fair and unfair on one key still exclude
 * each other, a planted line is survived, and a release hands the lock to the head with no
 * command of the head's own.
 */
import { describe, expect, it } from 'vitest'
import { createLocks, InvalidArgumentError, LockBusyError } from '../../../src/index.js'
import type { LockBackend } from '../../../src/lock/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { commandsSinceReset } from '../../support/command-stats.js'
import { sleep, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('fair: true on Redis', () => {
  const redis = useRedisServer({ flush: true })
  const locksOf = (fair = true) => createLocks({ redis: redis.client(), namespace: 'f1', fair })
  const inLine = (key: string) => redis.admin().zcard(`f1:{l:${key}}:q`)

  it('bad input: fair must be a boolean; a backend without an order refuses fair: true with nothing sent', async () => {
    expect(() => locksOf('yes' as never)).toThrow(expect.objectContaining({ argument: 'fair' }))
    const locks = locksOf(false)
    await expect(locks.acquire('k', { fair: 1 as never })).rejects.toMatchObject({ argument: 'fair' })
    let acquires = 0
    const backend: LockBackend = {
      name: 'unordered',
      acquire: async () => (acquires++, undefined),
      close: async () => {},
    }
    const other = createLocks({ backend })
    await expect(other.acquire('k', { fair: true })).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(other.withLock('k', () => 1, { fair: true })).rejects.toMatchObject({ argument: 'fair' })
    expect(acquires).toBe(0)
    await locks.close()
  })

  it('local waiters are served in arrival order; tryAcquire does not pass the line; a wait that gives up leaves it', async () => {
    const locks = locksOf()
    const holder = await locks.acquire('q', { lease: '5s' })
    const order: number[] = []
    const waits: Promise<void>[] = []
    for (const i of [0, 1, 2]) {
      waits.push(
        (async () => {
          const held = await locks.acquire('q', { wait: '10s' })
          order.push(i)
          await sleep(5)
          await held.release()
        })(),
      )
      await until(async () => (await inLine('q')) === i + 1, `waiter ${i} in line`) // arrival order
    }
    await expect(locks.acquire('q', { wait: 50 })).rejects.toBeInstanceOf(LockBusyError)
    await until(async () => (await inLine('q')) === 3, 'the one that gave up to leave', 2_000)
    await holder.release()
    // Free for a moment between holders, but the line is not empty: a try does not get in.
    await until(() => order.length >= 1, 'the first to be served')
    await Promise.all(waits)
    expect(order).toEqual([0, 1, 2])
    expect(await inLine('q')).toBe(0)
    const free = await locks.tryAcquire('q')
    expect(free).toBeDefined()
    await free!.release()
    await locks.close()
  })

  it('fair and unfair holders on one key still exclude each other', async () => {
    const fair = locksOf(true)
    const unfair = locksOf(false)
    const held = await fair.acquire('mixed')
    expect(await unfair.tryAcquire('mixed')).toBeUndefined()
    const waiting = unfair.acquire('mixed', { wait: '5s' })
    await held.release() // the fair release also wakes the unfair waiters' channel when the line is empty
    const next = await waiting
    expect(await fair.tryAcquire('mixed')).toBeUndefined()
    await next.release()
    await fair.close()
    await unfair.close()
  })

  it('a line planted with a foreign type, or a planted lock without expiry, is repaired, not fatal', async () => {
    const locks = locksOf()
    await redis.admin().set('f1:{l:p}:q', 'garbage')
    await redis.admin().set('f1:{l:p}:lock', 'someone:1')
    const waiting = locks.acquire('p', { wait: '5s', lease: 300 })
    const held = await waiting // the planted lock got an expiry (300 ms) and ended
    expect(held.token).toBeGreaterThan(0n)
    await held.release()
    await locks.close()
  })

  it('a release hands the lock to the head: the head gets it with no command of its own, with a greater token', async () => {
    const holderLocks = locksOf()
    const waiterLocks = locksOf()
    const holder = await holderLocks.acquire('h', { lease: '30s' })
    const waiting = waiterLocks.acquire('h', { lease: '30s', wait: '20s' })
    await until(async () => (await inLine('h')) === 1, 'the waiter in line')
    await sleep(50) // its first attempt's reply is in: it sleeps on its channel (its next beat is 10 s away)
    await redis.admin().config('RESETSTAT')
    await holder.release()
    const next = await waiting
    const sent = await commandsSinceReset(redis.admin())
    // One script ran: the holder's release.lua, which took the lock for the head (an acquire of its own would be a second).
    expect((sent.eval ?? 0) + (sent.evalsha ?? 0)).toBe(1)
    expect(next.token).toBeGreaterThan(holder.token)
    expect(await redis.admin().get('f1:{l:h}:lock')).toMatch(new RegExp(`^[0-9a-f]{32}:${next.token}$`))
    expect(next.validForMs).toBeGreaterThan(10_000) // its lease: what its last beat left, counted from that attempt
    await next.release()
    expect(await redis.admin().exists('f1:{l:h}:lock')).toBe(0)
    await holderLocks.close()
    await waiterLocks.close()
  })
})
