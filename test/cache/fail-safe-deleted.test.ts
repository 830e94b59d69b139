/**
 * A deleted value is never a fail-safe fallback. A process that missed a delete's broadcast
 * (its subscriber was down) checks its L1 entry with Redis; get-or-lock reports the entry's
 * fence, and a fallback whose version is below it was deleted, not lost: a failing reload
 * then gets the loader's error. A value Redis lost (no fence) stays a fallback.
 */
import type { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'
import { gate, until } from '../support/timing.js'
import { scriptSource } from '../../src/redis/scripts.js'
import { useWorkerSuite } from '../support/worker-suite.js'
import { cacheParts } from '../../src/cache/cache.js'

const WORKER = new URL('../fixtures/cache-worker.ts', import.meta.url)
const POLICY = { ttl: '1m', staleIfError: '1m' }
/** The subscriber (a duplicate of the cache's client) stays down this long after a kill: the broadcast is surely missed. */
const RECONNECT_MS = 5_000

const subscriberOf = (cache: Cache) => (cacheParts(cache).core.notifier as unknown as { subscriber?: Redis }).subscriber
const failing = async (): Promise<never> => {
  throw new Error('database down')
}
const answer = (result: Promise<unknown>) =>
  result.then(
    (value) => value,
    (error: Error) => error.message,
  )

describe.skipIf(!redisAvailable)('fail-safe after a missed delete (another process)', () => {
  const suite = useWorkerSuite(WORKER)
  const mine: Cache[] = []
  const clients: Redis[] = []
  afterEach(async () => {
    await Promise.all(mine.splice(0).map((cache) => cache.close()))
    for (const client of clients.splice(0)) client.disconnect()
  })

  /** A cache in this process holding the worker's 'old' in L1, its subscriber killed and not back for RECONNECT_MS. */
  async function missing(): Promise<{ cache: Cache; failSafes: () => number }> {
    const [worker] = await suite.spawn(1, { CACHE_OPTIONS: JSON.stringify(POLICY) })
    const client = suite.server().client({ retryStrategy: () => RECONNECT_MS })
    client.on('error', () => {})
    clients.push(client)
    const cache = createCache({ redis: client, ...POLICY })
    mine.push(cache)
    await cache.ready()
    const [loaded] = await worker!.request<{ ok: boolean; value: { value: string } }[]>({
      op: 'burst',
      keys: ['k'],
      calls: 1,
      loaderMs: 0,
      value: 'old',
    })
    expect(loaded!.value.value).toBe('old')
    expect(await cache.getOrLoad<{ value: string }>('k', failing)).toMatchObject({ value: 'old' }) // from Redis, now in L1
    let failSafes = 0
    cache.on('fail-safe', () => failSafes++)
    await until(() => subscriberOf(cache)?.status === 'ready', 'the subscriber to connect')
    await suite.redis().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await until(() => subscriberOf(cache)!.status !== 'ready', 'the cache to see its subscriber drop')
    return { cache, failSafes: () => failSafes }
  }

  it("a delete() in another process, missed: a failing reload gets the loader's error, not the deleted value", async () => {
    const { cache, failSafes } = await missing()
    await suite.workers()[0]!.request({ op: 'delete', key: 'k' })
    expect(await suite.redis().hget('sg:{k:k}', 'f')).not.toBeNull() // the fence the lookup reports
    expect(await answer(cache.getOrLoad('k', failing))).toBe('database down')
    expect(failSafes()).toBe(0)
    expect(subscriberOf(cache)!.status).not.toBe('ready') // the broadcast was missed, not heard
    expect(await cache.getOrLoad('k', async () => 'new')).toBe('new') // the deleted value is gone from L1 too
  })

  it('a value Redis lost (no fence) while the subscriber was down is still served as fail-safe', async () => {
    const { cache, failSafes } = await missing()
    await suite.redis().flushall()
    expect(await cache.getOrLoad<{ value: string }>('k', failing)).toMatchObject({ value: 'old' })
    expect(failSafes()).toBe(1)
  })
})

describe.skipIf(!redisAvailable)("fail-safe after a delete (a waiter's Redis fallback)", () => {
  const suite = useCacheSuite()

  it('a waiter whose Redis fallback is deleted while it waits does not fall back to it when the reload fails', async () => {
    const policy = { ttl: 50, staleIfError: '1m', l1: false as const } // Redis is the only fallback, and the only clock
    const [a, b] = [suite.cache(policy), suite.cache(policy)]
    await Promise.all([a.ready(), b.ready()])
    expect(await a.getOrLoad('k', async () => 'old')).toBe('old')
    await until(
      async () => (await suite.admin().exists('sg:{k:k}:v')) === 0,
      'the value to leave its ttl (fallback only)',
    )
    const started = gate()
    const finish = gate()
    const leading = a.getOrLoad('k', async () => (started.open(), await finish.promise, 'new'))
    await started.promise
    let waits = 0
    b.on('wait', () => waits++)
    let failSafes = 0
    b.on('fail-safe', () => failSafes++)
    const waiting = answer(b.getOrLoad('k', failing)) // finds 'old' as its fallback, and a's lock
    await until(() => waits === 1, "b to wait for a's load")
    await a.delete('k')
    finish.open()
    expect(await leading).toBe('new') // its own callers get it; the commit is fenced
    expect(a.stats().fenced).toBe(1)
    expect(await waiting).toBe('database down') // b re-checked, reloaded, and had no fallback
    expect(failSafes).toBe(0)
  })
})

describe.skipIf(!redisAvailable)('fail-safe after a delete whose broadcast is lost (early refresh)', () => {
  const suite = useCacheSuite()
  const invalidate = scriptSource(new URL('../../src/cache/redis/scripts/invalidate.lua', import.meta.url))

  it("an early refresh that finds a delete's fence above its L1 copy drops the copy: a failing refresh does not keep it", async () => {
    const cache = suite.cache({ ttl: '10s', staleIfError: '1m', earlyRefresh: 0.01 })
    await cache.ready()
    expect(await cache.getOrLoad('k', async () => 'old')).toBe('old') // in L1 and Redis
    // A delete whose broadcast never arrives, with the subscriber still up (a lost message, not a lost connection).
    await suite.admin().eval(invalidate, 2, 'sg:{k:k}', 'sg:{k:k}:v', 60_000, '', '')
    let failSafes = 0
    cache.on('fail-safe', () => failSafes++)
    let refreshed = false
    const refreshFails = async (): Promise<never> => {
      refreshed = true
      throw new Error('database down')
    }
    // Served from L1 (fresh there) until the early refresh is due (1 % of the ttl), which one of
    // these calls starts; its loader fails.
    await until(async () => {
      if (!refreshed) expect(await cache.getOrLoad('k', refreshFails)).toBe('old')
      return refreshed
    }, 'the early refresh to run its loader')
    // Its lookup saw the fence and dropped the copy before the loader ran: no more 'old'.
    await until(
      async () => (await cache.getOrLoad('k', async () => 'new').catch(() => undefined)) === 'new',
      'the deleted copy to leave L1',
      5_000,
    )
    expect(failSafes).toBe(0)
  })
})
