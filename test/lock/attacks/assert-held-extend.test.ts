/**
 * `assertHeld()` / `validForMs` after `extend()`, with the event loop blocked so that no
 * timer runs (the clock read at the check is all there is): a lease extended longer is
 * still held past the old lease; one shortened is lost past the new one; and a shortening
 * whose reply never came (it ran in Redis) must count as shortened: the lock may have expired
 * there at the shorter lease and been taken by another.
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createLocks, LockLostError } from '../../../src/index.js'
import { startBlackholeProxy } from '../../support/blackhole-proxy.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { until } from '../../support/timing.js'

/** Blocks the event loop: no timer, renewal or deadline runs meanwhile. */
function block(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // busy
  }
}

describe.skipIf(!redisAvailable)('assertHeld() after extend()', () => {
  const redis = useRedisServer({ flush: true })
  const NS = 'adv23ah'

  it('extended to 5 s from a 300 ms lease: held after 600 ms blocked; shortened to 300 ms from 5 s: lost after 600 ms blocked', async () => {
    for (const fair of [false, true]) {
      const locks = createLocks({ redis: redis.client(), namespace: NS, fair })
      const longer = await locks.acquire(`longer-${fair}`, { lease: 300 })
      await longer.extend(5_000)
      block(600)
      expect(() => longer.assertHeld()).not.toThrow()
      expect(longer.validForMs).toBeGreaterThan(3_000)
      await longer.release()

      const shorter = await locks.acquire(`shorter-${fair}`, { lease: 5_000 })
      await shorter.extend(300)
      block(600)
      expect(shorter.validForMs).toBe(0)
      expect(() => shorter.assertHeld()).toThrow(LockLostError)
      await shorter.release().catch(() => {})
      await locks.close()
    }
  })

  it('a shortening extend() that timed out (it ran in Redis; its reply was held back) is counted as shortened', async () => {
    const proxy = await startBlackholeProxy(redis.server().port)
    const client = new Redis({ host: '127.0.0.1', port: proxy.port, maxRetriesPerRequest: null })
    client.on('error', () => {})
    const slow = createLocks({ redis: client, namespace: NS, commandTimeout: 300 })
    const other = createLocks({ redis: redis.client(), namespace: NS })
    try {
      const held = await slow.acquire('k', { lease: 10_000 })
      proxy.stall('replies') // the PEXPIRE reaches Redis and runs; its answer comes late
      await expect(held.extend(400)).rejects.toThrow()
      const taken = await other.acquire('k', { lease: 10_000, wait: 5_000 }) // Redis expired it at 400 ms
      expect(taken.token).toBeGreaterThan(held.token)
      // The first holder, told nothing since, must not believe it still holds the lock.
      expect({
        validForMs: held.validForMs,
        threw: (() => {
          try {
            held.assertHeld()
            return false
          } catch {
            return true
          }
        })(),
      }).toEqual({ validForMs: 0, threw: true })
      await taken.release()
      proxy.resume()
      await until(() => held.signal.aborted, 'the first holder to learn', 5_000)
    } finally {
      proxy.resume()
      await Promise.all([slow.close(), other.close()])
      client.disconnect()
      await proxy.close()
    }
  }, 30_000)
})
