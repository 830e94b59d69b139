/**
 * loaderConcurrency against hostile loaders, with two "processes" (two LoaderPermits on
 * their own connections, each with its own local permits) sharing one Redis semaphore: a
 * loader that throws (sync or async) gives both its permits back at once, and a loader that
 * runs past the permit's lease keeps its permit (renewed) so the other process's load does
 * not run beside it. Counted with a shared "inside" counter, not timed. And through
 * createCache at a cold start (connections still connecting, which LoaderPermits alone
 * would treat as Redis unavailable): the first lookups wait for the connection, so the
 * loads after them ask for fleet permits and the cap holds.
 */
import { describe, expect, it } from 'vitest'
import { NEVER_ABORTED } from '../../src/cache/call.js'
import { LoaderPermits } from '../../src/cache/loader-permits.js'
import { createCache, LoaderConcurrencyError } from '../../src/index.js'
import { CacheEmitter } from '../../src/events.js'
import { semaphoreKeys } from '../../src/lock/semaphore/redis/store.js'
import { useRedisServer } from '../support/redis-suite.js'
import { redisAvailable } from '../support/redis.js'
import { sleep } from '../support/timing.js'

describe.skipIf(!redisAvailable)('loaderConcurrency with hostile loaders', () => {
  const redis = useRedisServer({ flush: true })

  /** Fallbacks to the local permit alone (Redis judged unavailable): none expected here. */
  let fallbacks = 0

  /** Two permit sets on connections that are up (a connecting one counts as Redis unavailable). */
  async function twoProcesses(namespace: string, leaseMs: number): Promise<[LoaderPermits, LoaderPermits]> {
    const timing = { leaseMs, commandTimeoutMs: 2_000 }
    fallbacks = 0
    const make = async () => {
      const client = redis.client()
      await client.ping()
      const events = new CacheEmitter()
      events.on('redis-error', () => void fallbacks++)
      return new LoaderPermits(client, namespace, 1, 100, timing, () => false, events)
    }
    return [await make(), await make()]
  }

  it('loaders that throw (sync and async) give their permits back: the other process loads at once, the semaphore ends empty', async () => {
    const [a, b] = await twoProcesses('hostile-throw', 5_000)
    const outcomes: string[] = []
    for (let i = 0; i < 10; i++) {
      const load =
        i % 2 === 0
          ? () => {
              throw new Error(`sync ${i}`)
            }
          : async () => {
              throw new Error(`async ${i}`)
            }
      outcomes.push(await a.run(`k${i}`, 2_000, NEVER_ABORTED, load).then(String, (error: Error) => error.message))
    }
    expect(outcomes).toEqual(Array.from({ length: 10 }, (_, i) => `${i % 2 === 0 ? 'sync' : 'async'} ${i}`))
    // One permit of 1: b waits at most 1 s, far less than the 5 s lease an orphan would hold it for.
    expect(await b.run('other', 1_000, NEVER_ABORTED, async () => 'b loaded')).toBe('b loaded')
    expect(await a.run('again', 1_000, NEVER_ABORTED, async () => 'a loaded')).toBe('a loaded')
    await Promise.all([a.close(), b.close()])
    expect(fallbacks).toBe(0)
    expect(await redis.admin().zcard(semaphoreKeys('hostile-throw', 'loaders').holders)).toBe(0)
  }, 30_000)

  it('a loader running 5 leases keeps its permit: the other process, waiting 3 leases, does not run beside it', async () => {
    const leaseMs = 200
    const [a, b] = await twoProcesses('hostile-long', leaseMs)
    let inside = 0
    let peak = 0
    const counted = async <T>(ms: number, value: T): Promise<T> => {
      peak = Math.max(peak, ++inside)
      try {
        await sleep(ms)
        return value
      } finally {
        inside--
      }
    }
    const long = a.run('long', 1_000, NEVER_ABORTED, () => counted(5 * leaseMs, 'a'))
    await expect.poll(() => inside, { timeout: 5_000 }).toBe(1)
    const denied = b.run('short', 3 * leaseMs, NEVER_ABORTED, () => counted(1, 'b'))
    await expect(denied).rejects.toBeInstanceOf(LoaderConcurrencyError)
    expect(await long).toBe('a')
    expect(await b.run('short', 2_000, NEVER_ABORTED, () => counted(1, 'b'))).toBe('b')
    expect(peak).toBe(1)
    expect(fallbacks).toBe(0)
    await Promise.all([a.close(), b.close()])
  }, 30_000)
})

describe.skipIf(!redisAvailable)('loaderConcurrency at a cold start', () => {
  const redis = useRedisServer({ flush: true })

  it('two caches on connections not yet up, hit with 10 cold keys each at once: at most `limit` loads at once, no fallback', async () => {
    const caches = [0, 1].map(() =>
      createCache({ redis: redis.client(), namespace: 'cold-start', ttl: '1m', loaderConcurrency: { limit: 1 } }),
    )
    let fallbacks = 0
    for (const cache of caches)
      cache.on('redis-error', ({ operation }) => void (operation === 'loaderConcurrency' && fallbacks++))
    let inside = 0
    let peak = 0
    const load = (key: string) => async () => {
      peak = Math.max(peak, ++inside)
      await sleep(5)
      inside--
      return key
    }
    const keys = Array.from({ length: 10 }, (_, i) => `cold-${i}`)
    const calls = caches.flatMap((cache, c) => keys.map((key) => cache.getOrLoad(`${c}-${key}`, load(key))))
    expect((await Promise.all(calls)).length).toBe(20)
    expect({ peak, fallbacks }).toEqual({ peak: 1, fallbacks: 0 })
    await Promise.all(caches.map((cache) => cache.close()))
  }, 30_000)
})
