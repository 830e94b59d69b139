/**
 * The semaphore's front on a real redis-server, in one process: bad input (typed errors
 * naming the argument, no command sent), `await using`, `withPermit`, tokens, FIFO order
 * in line, giving up leaves the line, events, close(), and a backend without semaphores.
 * Cross-process failures: semaphore.cross-process.test.ts.
 */
import { describe, expect, it } from 'vitest'
import {
  createLocks,
  InvalidArgumentError,
  LockBusyError,
  LockLostError,
  LocksClosedError,
  RedisUnavailableError,
} from '../../../src/index.js'
import { Redis } from 'ioredis'
import { startBlackholeProxy } from '../../support/blackhole-proxy.js'
import type { LockBackend } from '../../../src/lock/index.js'
import { semaphoreKeys } from '../../../src/lock/semaphore/redis/store.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('locks.semaphore() on Redis', () => {
  const redis = useRedisServer({ flush: true })
  const locksOf = () => createLocks({ redis: redis.client(), namespace: 'sem1' })
  const keys = (name: string) => semaphoreKeys('sem1', name)

  /** Commands the server ran, other than the INFO that reads them. */
  async function commandsRun(): Promise<number> {
    const info = await redis.admin().info('commandstats')
    return [...info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)]
      .filter(([, name]) => name !== 'info')
      .reduce((sum, [, , calls]) => sum + Number(calls), 0)
  }

  it('bad input: InvalidArgumentError naming the argument, and no command sent', async () => {
    const locks = locksOf()
    const sem = locks.semaphore('ok', { permits: 3 })
    await sem.tryAcquire().then((permit) => permit?.release()) // the connection is up and the scripts loaded
    const before = await commandsRun()
    const bad: [string, () => unknown][] = [
      ['name', () => locks.semaphore('', { permits: 1 })],
      ['name', () => locks.semaphore(42 as never, { permits: 1 })],
      ['name', () => locks.semaphore('x'.repeat(1025), { permits: 1 })],
      ['name', () => locks.semaphore('\uD800', { permits: 1 })],
      ['options', () => locks.semaphore('s', undefined as never)],
      ['permits', () => locks.semaphore('s', {} as never)],
      ['permits', () => locks.semaphore('s', { permits: 0 })],
      ['permits', () => locks.semaphore('s', { permits: 1.5 })],
      ['permits', () => locks.semaphore('s', { permits: 10_001 })],
      ['permits', () => locks.semaphore('s', { permits: '3' as never })],
      ['lease', () => locks.semaphore('s', { permits: 1, lease: 10 })],
      ['wait', () => locks.semaphore('s', { permits: 1, wait: -1 })],
      ['fair', () => locks.semaphore('s', { permits: 1, fair: true } as never)],
      ['count', () => sem.acquire(0)],
      ['count', () => sem.acquire(4)],
      ['count', () => sem.acquire(1.5)],
      ['count', () => sem.tryAcquire(NaN)],
      ['count', () => sem.withPermit(() => 1, { count: 5 })],
      ['lease', () => sem.acquire(1, { lease: 'soon' })],
      ['wait', () => sem.tryAcquire(1, { wait: 10 } as never)],
      ['signal', () => sem.acquire(1, { signal: {} as never })],
      ['options', () => sem.acquire(1, null as never)],
      ['retries', () => sem.acquire(1, { retries: 3 } as never)],
      ['fn', () => sem.withPermit('nope' as never)],
    ]
    for (const [argument, call] of bad) {
      let thrown: unknown
      try {
        await call()
      } catch (error) {
        thrown = error
      }
      expect(thrown, argument).toBeInstanceOf(InvalidArgumentError)
      expect((thrown as InvalidArgumentError).argument).toBe(argument)
    }
    expect(await commandsRun()).toBe(before)
    await locks.close()
  })

  it('acquire / tryAcquire / await using / withPermit: at most `permits` held, tokens ascending, one per permit', async () => {
    const locks = locksOf()
    const sem = locks.semaphore('pool', { permits: 3 })
    const two = await sem.acquire(2)
    expect(two.count).toBe(2)
    expect(two.tokens).toHaveLength(2)
    expect(two.tokens[1]).toBe(two.tokens[0]! + 1n)
    expect(two.token).toBe(two.tokens[0])
    expect(await sem.tryAcquire(2)).toBeUndefined()
    {
      await using one = await sem.acquire(1, { wait: 0 })
      expect(one.tokens[0]).toBeGreaterThan(two.tokens[1]!)
      expect(await redis.admin().zcard(keys('pool').holders)).toBe(3)
      await expect(sem.acquire(1, { wait: 50 })).rejects.toBeInstanceOf(LockBusyError)
    }
    expect(await redis.admin().zcard(keys('pool').holders)).toBe(2) // given back at the block's end
    expect(await sem.withPermit(async (permit) => permit.count, { count: 1 })).toBe(1)
    await two.release()
    await two.release() // idempotent
    expect(await redis.admin().zcard(keys('pool').holders)).toBe(0)
    await locks.close()
  })

  it('FIFO: waiters get permits in the order they joined the line; a newcomer does not pass them even when a permit is free', async () => {
    const locks = locksOf()
    const sem = locks.semaphore('fifo', { permits: 2 })
    const holders = [await sem.acquire(1), await sem.acquire(1)]
    const order: string[] = []
    const big = sem.acquire(2, { wait: '10s' }).then((p) => (order.push('big'), p))
    await until(async () => (await redis.admin().zcard(keys('fifo').queue)) === 1, 'big in line')
    const small = sem.acquire(1, { wait: '10s' }).then((p) => (order.push('small'), p))
    await until(async () => (await redis.admin().zcard(keys('fifo').queue)) === 2, 'small in line')
    await holders[0]!.release()
    // One permit is free, but big (2) is at the head: small waits behind it, and so does a try.
    await sleep(100)
    expect(order).toEqual([])
    expect(await sem.tryAcquire(1)).toBeUndefined()
    await holders[1]!.release()
    const bigPermits = await big
    await bigPermits.release()
    await (await small).release()
    expect(order).toEqual(['big', 'small'])
    expect(await redis.admin().zcard(keys('fifo').queue)).toBe(0)
    await locks.close()
  })

  it("a waiter woken for a permit runs withPermit's fn before its UNSUBSCRIBE is sent (its channel is its own)", async () => {
    const locks = locksOf()
    const sem = locks.semaphore('unsub', { permits: 1 })
    const holder = await sem.acquire()
    const sent: string[] = []
    const sendCommand = Redis.prototype.sendCommand
    Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
      sent.push(args[0].name)
      return sendCommand.apply(this, args)
    }
    try {
      const served = sem.withPermit(() => void sent.push('fn'), { wait: '10s' })
      await until(async () => (await redis.admin().zcard(keys('unsub').queue)) === 1, 'the waiter in line')
      const [owner] = await redis.admin().zrange(keys('unsub').queue, '0', '0')
      await until(
        async () =>
          Number(((await redis.admin().pubsub('NUMSUB', `${keys('unsub').wake}${owner}`)) as unknown[])[1]) === 1,
        'the waiter subscribed',
      )
      sent.length = 0
      await holder.release()
      await served
      await until(() => sent.some((name) => name.endsWith('unsubscribe')), 'the UNSUBSCRIBE sent')
      const fnAt = sent.indexOf('fn')
      expect(fnAt).toBeGreaterThanOrEqual(0)
      expect(sent.findIndex((name) => name.endsWith('unsubscribe'))).toBeGreaterThan(fnAt)
    } finally {
      Redis.prototype.sendCommand = sendCommand
      await locks.close()
    }
  })

  it('a wait that runs out or is aborted leaves the line at once, so it holds nobody up', async () => {
    const locks = locksOf()
    const sem = locks.semaphore('leave', { permits: 1 })
    const holder = await sem.acquire()
    await expect(sem.acquire(1, { wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    const controller = new AbortController()
    const aborted = sem.acquire(1, { wait: '10s', signal: controller.signal })
    await until(async () => (await redis.admin().zcard(keys('leave').queue)) === 1, 'in line')
    controller.abort(new Error('caller gave up'))
    await expect(aborted).rejects.toThrow('caller gave up')
    await until(async () => (await redis.admin().zcard(keys('leave').queue)) === 0, 'the line to be empty', 2_000)
    await holder.release()
    // Nobody in line: free at once for a try.
    const next = await sem.tryAcquire()
    expect(next).toBeDefined()
    await next!.release()
    await locks.close()
  })

  it('events like the mutex (acquired, busy, released, lost), validForMs / assertHeld, and close() ends held permits', async () => {
    const locks = locksOf()
    const seen: string[] = []
    for (const event of ['acquired', 'busy', 'released', 'lost', 'backend-error'] as const)
      locks.on(event, (payload) => seen.push(`${event} ${payload.key}`))
    const sem = locks.semaphore('ev', { permits: 1 })
    const held = await sem.acquire(1, { lease: '2s' })
    expect(held.validForMs).toBeGreaterThan(1_500)
    held.assertHeld()
    expect(await sem.tryAcquire()).toBeUndefined()
    await held.release()
    const lost = await sem.acquire(1, { lease: 300 })
    await redis.admin().del(keys('ev').holders) // taken from under it: the renewal finds it gone
    await until(() => lost.signal.aborted, 'the watchdog to find the permit gone', 5_000)
    expect(lost.signal.reason).toBeInstanceOf(LockLostError)
    expect(() => lost.assertHeld()).toThrow(LockLostError)
    await expect(lost.release()).rejects.toBeInstanceOf(LockLostError)
    const open = await sem.acquire()
    await locks.close()
    expect(open.signal.reason).toBeInstanceOf(LockLostError)
    expect(await redis.admin().zcard(keys('ev').holders)).toBe(0)
    expect(() => locks.semaphore('ev', { permits: 1 })).toThrow(LocksClosedError)
    expect(seen).toEqual(['acquired ev', 'busy ev', 'released ev', 'acquired ev', 'lost ev', 'acquired ev', 'lost ev'])
  })

  it('data planted in the semaphore keys (foreign types, garbage counter) is repaired, not fatal', async () => {
    const locks = locksOf()
    const admin = redis.admin()
    const k = keys('planted')
    await admin.set(k.holders, 'garbage')
    await admin.set(k.queue, 'garbage')
    await admin.hset(k.beats, 'x', '1')
    await admin.lpush(k.tokens, 'x')
    await admin.set(k.counter, 'not-a-token')
    const sem = locks.semaphore('planted', { permits: 2 })
    const held = await sem.acquire(2)
    expect(held.token).toBeGreaterThan(1_000_000_000_000_000n) // restarted from the server clock in µs
    expect(await admin.type(k.holders)).toBe('zset')
    await held.release()
    expect(await admin.zcard(k.holders)).toBe(0)
    await locks.close()
  })

  it('Redis silent (black-holed): acquire fails with RedisUnavailableError within commandTimeout, never hangs', async () => {
    const proxy = await startBlackholeProxy(redis.server().port)
    const client = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: null })
    client.on('error', () => {})
    const locks = createLocks({ redis: client, namespace: 'sem1', commandTimeout: 300 })
    try {
      const sem = locks.semaphore('silent', { permits: 1 })
      await (await sem.acquire()).release() // connected, probed
      proxy.blackhole()
      const startedAt = performance.now()
      await expect(sem.acquire(1, { wait: '5s' })).rejects.toBeInstanceOf(RedisUnavailableError)
      expect(performance.now() - startedAt).toBeLessThan(3_000) // one bounded attempt, not the 5 s wait
    } finally {
      await locks.close()
      client.disconnect()
      await proxy.close()
    }
  })

  it('a backend without semaphores: InvalidArgumentError (backend) at semaphore(), nothing sent', () => {
    const backend: LockBackend = { name: 'custom', acquire: async () => undefined, close: async () => {} }
    const locks = createLocks({ backend })
    expect(() => locks.semaphore('s', { permits: 2 })).toThrow(
      expect.objectContaining({ argument: 'backend', name: 'InvalidArgumentError' }),
    )
  })
})
