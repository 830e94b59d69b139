/**
 * Attack on close() with 20,000 parked cross-process waits (1,000 subscribed, `maxWaits`, and
 * 19,000 answered by the shared poll alone): every call settles, none runs its loader, nothing is
 * left unhandled, and the process has no subscription left. Once with every wait parked, once
 * with close() called from inside the resumption of the first woken waits, so that the rest are
 * in every state at once: parked, woken and queued behind the 64-a-turn wake queue, re-checking.
 */
import { describe, expect, it } from 'vitest'
import { CacheClosedError, type Cache } from '../../../src/index.js'
import { entryKeys } from '../../../src/cache/redis/keys.js'
import { useCacheSuite } from '../../support/cache-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { until } from '../../support/timing.js'
import { failOnUnhandledRejections } from '../../support/unhandled.js'

const KEYS = 20_000
const NS = 'close-parked'
const keyOf = (i: number) => `k${i}`

describe.skipIf(!redisAvailable)('attack: close() with 20,000 parked waits', () => {
  const suite = useCacheSuite({ namespace: NS, l1: false, ttl: '10m' })
  failOnUnhandledRejections()

  /** Locks of a holder that never commits, on every key (a minute's lease). */
  async function plantLocks(): Promise<void> {
    const pipeline = suite.admin().pipeline()
    for (let i = 0; i < KEYS; i++) pipeline.set(entryKeys(NS, keyOf(i)).lock, 'elsewhere:1', 'PX', 60_000)
    await pipeline.exec()
  }

  /** 20,000 calls on the held keys, parked: the calls, with their settled results, and the loads they ran. */
  async function parkAll(
    waiter: Cache,
  ): Promise<{ calls: Promise<PromiseSettledResult<unknown>[]>; loads: () => number }> {
    let waits = 0
    let loads = 0
    waiter.on('wait', () => waits++)
    const calls = Array.from({ length: KEYS }, (_, i) => waiter.getOrLoad(keyOf(i), async () => (loads++, 'own load')))
    const settled = Promise.allSettled(calls)
    await until(() => waits === KEYS, `${KEYS} waits`, 60_000)
    return { calls: settled, loads: () => loads }
  }

  async function subscriptions(): Promise<number> {
    const channels = (await suite.admin().pubsub('CHANNELS', `${NS}:*`)) as string[]
    return channels.length
  }

  it('every wait parked: close() settles all 20,000 with CacheClosedError, 0 loads, 0 subscriptions left', async () => {
    await plantLocks()
    const waiter = suite.cache({ waitTimeout: '60s', onWaitTimeout: 'load' })
    await waiter.ready()
    const { calls, loads } = await parkAll(waiter)
    expect(await subscriptions()).toBe(1_000) // maxWaits; the rest are polled
    await waiter.close()
    const results = await calls
    const closed = results.filter((r) => r.status === 'rejected' && r.reason instanceof CacheClosedError).length
    expect(closed).toBe(KEYS)
    expect(loads()).toBe(0)
    await until(async () => (await subscriptions()) === 0, 'no subscription left')
  }, 120_000)

  it('close() from inside the first resumed waits: each call the committed value or CacheClosedError, 0 loads', async () => {
    await plantLocks()
    const waiter = suite.cache({ waitTimeout: '60s', onWaitTimeout: 'load' })
    await waiter.ready()
    const { calls, loads } = await parkAll(waiter)
    let waited = 0
    let closing: Promise<void> | undefined
    waiter.on('waited', () => {
      if (++waited === 100) closing = waiter.close()
    })
    // The holder commits every key (a set() publishes the value) and its locks go.
    const writer = suite.cache()
    await writer.ready()
    const admin = suite.admin()
    for (let from = 0; from < KEYS; from += 1_000) {
      const batch = Array.from({ length: 1_000 }, (_, j) => from + j)
      await Promise.all(batch.map((i) => writer.set(keyOf(i), `value ${i}`)))
      await admin.del(...batch.map((i) => entryKeys(NS, keyOf(i)).lock))
      if (closing) break
    }
    await until(() => closing !== undefined, 'close() to be called', 30_000)
    await closing
    const results = await calls
    let values = 0
    let closed = 0
    results.forEach((result, i) => {
      if (result.status === 'fulfilled') {
        expect(result.value).toBe(`value ${i}`)
        values++
      } else {
        expect(result.reason).toBeInstanceOf(CacheClosedError)
        closed++
      }
    })
    expect(values).toBeGreaterThanOrEqual(100)
    expect(values + closed).toBe(KEYS)
    expect(closed).toBeGreaterThan(0)
    expect(loads()).toBe(0)
    await until(async () => (await subscriptions()) === 0, 'no subscription left')
  }, 120_000)
})
