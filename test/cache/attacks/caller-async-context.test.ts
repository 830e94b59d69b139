/**
 * Attacks on "a call goes on in its caller's async context". Concurrent calls share one MGET
 * of fresh copies, whose reply came in the context of the call that scheduled it: before the
 * fix, every other miss of the batch ran its loader, and took its wait, in that neighbour's
 * AsyncLocalStorage (297 of 300 wrong here).
 *
 * Then "the parked wait resumes in its caller's async context", where the existing tests
 * do not reach: 300 waits past `maxWaits` (10), answered by the shared poll (one reply finds
 * hundreds of locks gone, resumed 64 a turn across several turns), whose locks go without a
 * value, so each caller takes the lock and runs its own loader after the wait. Every `waited`
 * listener and every loader must see its own caller's AsyncLocalStorage, none a neighbour's
 * from the same poll reply or wake turn.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { describe, expect, it } from 'vitest'
import { entryKeys } from '../../../src/cache/redis/keys.js'
import { useCacheSuite } from '../../support/cache-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { until } from '../../support/timing.js'

const KEYS = 300
const NS = 'poll-context'

describe.skipIf(!redisAvailable)('attack: poll-answered waits keep their callers async contexts', () => {
  const suite = useCacheSuite({ namespace: NS, l1: false, ttl: '10m' })
  const als = new AsyncLocalStorage<string>()

  it('100 concurrent misses, no other process: each loader and miss event sees its own caller', async () => {
    const cache = suite.cache()
    await cache.ready()
    await cache.getOrLoad('warm', async () => 'clock known') // the fresh GET path needs the server clock
    const loadedIn = new Map<string, string | undefined>()
    const missedIn = new Map<string, string | undefined>()
    cache.on('miss', ({ key }) => missedIn.set(key, als.getStore()))
    const calls = Array.from({ length: 100 }, (_, i) =>
      als.run(`request ${i}`, () => cache.getOrLoad(`m${i}`, async () => (loadedIn.set(`m${i}`, als.getStore()), i))),
    )
    expect(await Promise.all(calls)).toEqual(Array.from({ length: 100 }, (_, i) => i))
    const wrong = (seen: Map<string, string | undefined>) =>
      [...seen].filter(([key, store]) => store !== `request ${key.slice(1)}`)
    expect(loadedIn.size).toBe(100)
    expect(wrong(loadedIn)).toEqual([])
    expect(wrong(missedIn)).toEqual([])
  }, 30_000)

  it(`${KEYS} waits (10 subscribed, the rest polled) woken by one lock sweep: each waited event and loader sees its caller's store`, async () => {
    const admin = suite.admin()
    const locks = Array.from({ length: KEYS }, (_, i) => entryKeys(NS, `k${i}`).lock)
    const pipeline = admin.pipeline()
    for (const lock of locks) pipeline.set(lock, 'elsewhere:1', 'PX', 60_000)
    await pipeline.exec()
    const waiter = suite.cache({ maxWaits: 10, waitTimeout: '30s', onWaitTimeout: 'throw' })
    await waiter.ready()
    let waits = 0
    let polled = 0
    const waitedIn = new Map<string, string | undefined>()
    const loadedIn = new Map<string, string | undefined>()
    waiter.on('wait', () => waits++)
    waiter.on('wait-capped', ({ polled: p }) => void (p && polled++))
    waiter.on('waited', ({ key }) => waitedIn.set(key, als.getStore()))
    const calls = Array.from({ length: KEYS }, (_, i) =>
      als.run(`request ${i}`, async () => {
        const value = await waiter.getOrLoad(`k${i}`, async () => (loadedIn.set(`k${i}`, als.getStore()), `own ${i}`))
        return { value, after: als.getStore() }
      }),
    )
    await until(() => waits === KEYS, 'every call to wait')
    expect(polled).toBe(KEYS - 10)
    await admin.del(...locks) // the holder gave up without a value: each caller loads its own
    const results = await Promise.all(calls)
    results.forEach((result, i) => expect(result).toEqual({ value: `own ${i}`, after: `request ${i}` }))
    const wrongWaited = [...waitedIn].filter(([key, store]) => store !== `request ${key.slice(1)}`)
    const wrongLoaded = [...loadedIn].filter(([key, store]) => store !== `request ${key.slice(1)}`)
    expect(waitedIn.size).toBe(KEYS)
    expect(loadedIn.size).toBe(KEYS)
    expect(wrongWaited).toEqual([])
    expect(wrongLoaded).toEqual([])
  }, 60_000)
})
