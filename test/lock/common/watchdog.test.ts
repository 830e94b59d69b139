/**
 * The shared lease watchdog (src/lease/watchdog.ts), through its two users: the lock API
 * and the cache's leader lease. Real redis-servers; the partition is a TCP proxy that
 * stops forwarding (test/support/blackhole-proxy.ts), so renewals hang instead of failing.
 */
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache, createLocks, LockLostError } from '../../../src/index.js'
import { startBlackholeProxy } from '../../support/blackhole-proxy.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { until } from '../../support/timing.js'

const LEASE_MS = 1_000
/** Far longer than the lease: before the fix, a hung renewal held the signal back this long. */
const COMMAND_TIMEOUT_MS = 10_000

describe.skipIf(!redisAvailable)('lease watchdog', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedis()
  })
  afterAll(async () => {
    await server?.stop()
  })

  it("aborts the cache loader's signal at the lease deadline while its renewal hangs on a black-holed connection (issue 10 item 11)", async () => {
    const proxy = await startBlackholeProxy(server.port)
    const cut = new Redis({ port: proxy.port, host: '127.0.0.1', maxRetriesPerRequest: null })
    const other = server.client()
    const cache = createCache({
      redis: cut,
      ttl: '1m',
      lock: { lease: LEASE_MS, maxHold: '60s' },
      redisTimeout: COMMAND_TIMEOUT_MS,
      namespace: 'wd-cache',
    })
    let startedAt = 0
    let abortedAt = 0
    let reason: unknown
    const load = cache.getOrLoad('k', async ({ signal }) => {
      startedAt = performance.now()
      proxy.blackhole() // from now on nothing reaches Redis, and nothing comes back
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, COMMAND_TIMEOUT_MS + 5_000)
        signal.addEventListener('abort', () => {
          abortedAt = performance.now()
          reason = signal.reason
          clearTimeout(timer)
          resolve()
        })
      })
      return 'v'
    })
    await until(() => abortedAt > 0, 'the loader signal to abort', COMMAND_TIMEOUT_MS + 10_000)
    expect(reason).toBeInstanceOf(LockLostError)
    expect((reason as LockLostError).reason).toMatch(/lease ran out/)
    // Before: the first renewal (at lease/3) hung for the whole command timeout (10 s) and
    // only its failure ended the lease. Now a local timer ends it at sent + lease − margin.
    const heldMs = abortedAt - startedAt
    expect(heldMs).toBeLessThan(LEASE_MS + 1_500) // generous; it is ≤ lease − margin after the lookup was sent
    // The lock really has expired on the server by the time another process could take it.
    await until(
      async () => (await other.exists('wd-cache:{k:k}:lock')) === 0,
      'the lock to expire on the server',
      5_000,
    )
    console.log(
      `[watchdog] cache loader: signal aborted ${heldMs.toFixed(0)} ms after the loader ` +
        `started (lease ${LEASE_MS} ms, renewal hanging for up to ${COMMAND_TIMEOUT_MS} ms)`,
    )
    cut.disconnect()
    await proxy.close()
    await load.catch(() => {})
    await cache.close().catch(() => {})
  }, 40_000)

  it("aborts a held lock's signal before another holder can get in, while the renewal hangs", async () => {
    const proxy = await startBlackholeProxy(server.port)
    const cut = new Redis({ port: proxy.port, host: '127.0.0.1', maxRetriesPerRequest: null })
    const direct = server.client()
    const cutLocks = createLocks({ redis: cut, commandTimeout: COMMAND_TIMEOUT_MS, namespace: 'wd-lock' })
    const otherLocks = createLocks({ redis: direct, namespace: 'wd-lock' })
    let abortedAt = 0
    let otherAt = 0
    const held = await cutLocks.acquire('k', { lease: LEASE_MS })
    const acquiredAt = performance.now()
    held.signal.addEventListener('abort', () => (abortedAt = performance.now()))
    proxy.blackhole()
    const other = await otherLocks.acquire('k', { wait: '20s', lease: '5s' })
    otherAt = performance.now()
    expect(held.signal.aborted).toBe(true)
    expect(held.signal.reason).toBeInstanceOf(LockLostError)
    expect(abortedAt - acquiredAt).toBeLessThan(LEASE_MS + 1_500)
    console.log(
      `[watchdog] withLock: signal aborted at ${(abortedAt - acquiredAt).toFixed(0)} ms, ` +
        `next holder in at ${(otherAt - acquiredAt).toFixed(0)} ms (lease ${LEASE_MS} ms)`,
    )
    await other.release()
    cut.disconnect()
    await proxy.close()
    await cutLocks.close()
    await otherLocks.close()
  }, 40_000)

  it('keeps a lock taken after a long wait: renewals count from the acquisition, not the first attempt (node-redlock #169)', async () => {
    const locks = createLocks({ redis: server.client(), namespace: 'wd-wait' })
    const first = await locks.acquire('k', { lease: 300 })
    const waiting = locks.acquire('k', { lease: 300, wait: '10s' })
    await new Promise((resolve) => setTimeout(resolve, 900)) // the waiter's first attempt is 3 leases old
    await first.release()
    const second = await waiting
    await new Promise((resolve) => setTimeout(resolve, 1_000)) // > 3 leases of holding, renewed every 100 ms
    expect(second.signal.aborted).toBe(false)
    await second.release()
    await locks.close()
  })

  it('a lock lost to another owner is never taken back by a renewal, and its late release deletes nothing', async () => {
    const redis = server.client()
    const locks = createLocks({ redis, namespace: 'wd-stolen' })
    const held = await locks.acquire('k', { lease: 600 })
    // Another owner takes over (as after an expiry during a pause).
    await redis.set('wd-stolen:{l:k}:lock', 'someone-else:1', 'PX', 60_000)
    await until(() => held.signal.aborted, 'the renewal to notice the loss', 5_000)
    expect((held.signal.reason as LockLostError).reason).toMatch(/taken by another owner/)
    await new Promise((resolve) => setTimeout(resolve, 400)) // more renewal periods: none may re-take it
    expect(await redis.get('wd-stolen:{l:k}:lock')).toBe('someone-else:1')
    await held.release()
    expect(await redis.get('wd-stolen:{l:k}:lock')).toBe('someone-else:1')
    await expect(held.extend()).rejects.toBeInstanceOf(LockLostError)
    await locks.close()
  })
})
