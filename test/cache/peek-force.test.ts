import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
  createCache,
  InvalidArgumentError,
  RedisUnavailableError,
  type Cache,
  type CacheOptions,
} from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { commandsSinceReset as sentSinceReset } from '../support/command-stats.js'
import { redisAvailable } from '../support/redis.js'
import { sleep } from '../support/timing.js'

function invalidArgument(argument: string) {
  return expect.objectContaining({ name: 'InvalidArgumentError', argument })
}

describe.skipIf(!redisAvailable)('get, has and forceRefresh', () => {
  const suite = useCacheSuite()

  async function cache(options: Partial<CacheOptions> = {}): Promise<Cache> {
    const created = suite.cache(options)
    await created.ready()
    return created
  }

  it('get: a miss is undefined after one GET, and never loads', async () => {
    const reader = await cache()
    await suite.admin().config('RESETSTAT')
    expect(await reader.get('absent')).toBeUndefined()
    expect(await reader.has('absent')).toBe(false)
    expect(await sentSinceReset(suite.admin())).toEqual({ get: 2 })
    expect(await suite.admin().keys('*')).toEqual([]) // nothing written: no lock, no counter
  })

  it("get: another process's value costs one GET, then none (L1)", async () => {
    const writer = await cache()
    const reader = await cache()
    await writer.getOrLoad('user:1', async () => ({ name: 'Ada' }))
    await suite.admin().config('RESETSTAT')
    expect(await reader.get('user:1')).toEqual({ name: 'Ada' })
    expect(await sentSinceReset(suite.admin())).toEqual({ get: 1 })
    await suite.admin().config('RESETSTAT')
    expect(await reader.get('user:1')).toEqual({ name: 'Ada' })
    expect(await reader.has('user:1')).toBe(true)
    expect(await sentSinceReset(suite.admin())).toEqual({})
  })

  it('has: a cached null is there; get returns it', async () => {
    const peeker = await cache({ l1: false })
    await peeker.getOrLoad('nothing', async () => null)
    expect(await peeker.get('nothing')).toBeNull()
    expect(await peeker.has('nothing')).toBe(true)
  })

  it('get: a stale value (past its ttl, in grace) is a miss; a deleted one too', async () => {
    const peeker = await cache({ ttlJitter: 0 })
    await peeker.getOrLoad('soon-stale', async () => 'v', { ttl: 50, staleTtl: '30s' })
    expect(await peeker.get('soon-stale')).toBe('v')
    await sleep(120)
    expect(await peeker.get('soon-stale')).toBeUndefined()
    await peeker.getOrLoad('deleted', async () => 'v')
    await peeker.delete('deleted')
    expect(await peeker.has('deleted')).toBe(false)
  })

  it('get/has: a bad key rejects with InvalidArgumentError naming key, and sends nothing', async () => {
    const peeker = await cache()
    await suite.admin().config('RESETSTAT')
    for (const bad of ['', 5, undefined, 'a'.repeat(20_000), '\uD800']) {
      await expect(peeker.get(bad as string)).rejects.toEqual(invalidArgument('key'))
      await expect(peeker.has(bad as string)).rejects.toEqual(invalidArgument('key'))
    }
    expect(await sentSinceReset(suite.admin())).toEqual({})
  })

  it('get: Redis down rejects with RedisUnavailableError (not a guessed miss); after close, CacheClosedError', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, maxRetriesPerRequest: 1, retryStrategy: () => 50 })
    dead.on('error', () => {})
    const down = createCache({ redis: dead, ttl: '1m', redisTimeout: 200 })
    await down.ready()
    await expect(down.get('k')).rejects.toBeInstanceOf(RedisUnavailableError)
    await down.close()
    await expect(down.has('k')).rejects.toMatchObject({ name: 'CacheClosedError' })
    dead.disconnect()
  })

  it('forceRefresh: reloads a fresh value; 10 forced calls at once in one process run the loader once', async () => {
    const forcing = await cache()
    let loads = 0
    const loader = async () => {
      loads++
      await sleep(50)
      return `v${loads}`
    }
    expect(await forcing.getOrLoad('fresh', loader)).toBe('v1')
    expect(await forcing.getOrLoad('fresh', loader)).toBe('v1') // fresh: no load
    const forced = await Promise.all(
      Array.from({ length: 10 }, () => forcing.getOrLoadResult('fresh', loader, { forceRefresh: true })),
    )
    expect(loads).toBe(2)
    expect(forced.map((r) => r.value)).toEqual(Array(10).fill('v2'))
    expect(forced.filter((r) => r.outcome === 'loaded')).toHaveLength(1)
    expect(await forcing.getOrLoad('fresh', loader)).toBe('v2') // stored: L1 and Redis
    const other = await cache()
    expect(await other.get('fresh')).toBe('v2')
  })

  it('forceRefresh: a forced call during a plain load waits for it, then reloads (the plain load may predate the change)', async () => {
    const forcing = await cache()
    let loads = 0
    const loader = async () => {
      loads++
      await sleep(80)
      return `v${loads}`
    }
    const plain = forcing.getOrLoad('busy', loader)
    const forced = forcing.getOrLoad('busy', loader, { forceRefresh: true })
    expect(await plain).toBe('v1')
    expect(await forced).toBe('v2')
    expect(loads).toBe(2)
  })

  it('forceRefresh: a value in grace is reloaded in the foreground, not served stale', async () => {
    const forcing = await cache({ ttlJitter: 0 })
    let loads = 0
    const loader = async () => `v${++loads}`
    await forcing.getOrLoad('graced', loader, { ttl: 50, staleTtl: '30s' })
    await sleep(120)
    const result = await forcing.getOrLoadResult('graced', loader, { forceRefresh: true, ttl: '30s' })
    expect(result).toEqual({ value: 'v2', outcome: 'loaded' })
    expect(loads).toBe(2)
  })

  it('forceRefresh: a non-boolean rejects with InvalidArgumentError naming forceRefresh; no loader runs, nothing sent', async () => {
    const forcing = await cache()
    await suite.admin().config('RESETSTAT')
    let loads = 0
    for (const bad of ['yes', 1, null]) {
      const options = { forceRefresh: bad as unknown as boolean }
      await expect(forcing.getOrLoad('k', async () => ++loads, options)).rejects.toEqual(
        invalidArgument('forceRefresh'),
      )
    }
    expect(loads).toBe(0)
    expect(await sentSinceReset(suite.admin())).toEqual({})
  })

  it('forceRefresh with Redis down: the copy held here is served (stale) and no reload runs; the database is spared', async () => {
    const dead = new Redis({ host: '127.0.0.1', port: 1, maxRetriesPerRequest: 1, retryStrategy: () => 50 })
    dead.on('error', () => {})
    const down = createCache({ redis: dead, ttl: '1m', redisTimeout: 200 })
    await down.ready()
    let loads = 0
    const loader = async () => ++loads
    expect(await down.getOrLoad('k', loader)).toBe(1) // loaded in-process, kept in L1
    const forced = await down.getOrLoadResult('k', loader, { forceRefresh: true })
    expect(forced).toEqual({ value: 1, outcome: 'stale' })
    expect(loads).toBe(1)
    await down.close()
    dead.disconnect()
  })

  it('forceRefresh without Redis (in-process): reloads, once for concurrent forced calls', async () => {
    const local = createCache({ ttl: '30s' })
    let loads = 0
    const loader = async () => {
      await sleep(20)
      return ++loads
    }
    await local.getOrLoad('k', loader)
    const forced = await Promise.all([1, 2, 3].map(() => local.getOrLoad('k', loader, { forceRefresh: true })))
    expect(forced).toEqual([2, 2, 2])
    expect(await local.get('k')).toBe(2)
    await local.close()
  })

  it('InvalidArgumentError is the exported class', async () => {
    const peeker = await cache()
    await expect(peeker.get('')).rejects.toBeInstanceOf(InvalidArgumentError)
  })
})
