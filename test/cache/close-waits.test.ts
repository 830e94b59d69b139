/**
 * close() and calls waiting for another process's load, against a real redis-server: the
 * waits end at once (CacheClosedError, or a stale copy), instead of holding close() up to
 * their waitTimeout (measured before: close() took the whole 30 s waitTimeout, and the
 * waiter then ran its own loader, onWaitTimeout 'load', inside close()).
 * Also attacked: close() racing the leader's commit, close() twice, close() before the wait's
 * subscribe is confirmed (each call the value or CacheClosedError, no loader, nothing unhandled).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { CacheClosedError, type Cache } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'
import { gate, until } from '../support/timing.js'
import { failOnUnhandledRejections } from '../support/unhandled.js'

describe.skipIf(!redisAvailable)('close() with cross-process waits pending', () => {
  const suite = useCacheSuite()
  failOnUnhandledRejections()
  let leaderLoad = gate()
  beforeEach(() => void (leaderLoad = gate()))
  afterEach(() => leaderLoad.open()) // before the suite closes the leader, which waits for its load

  /** A leader cache that holds `key`'s lock (its loader waits on `leaderLoad`). */
  async function heldElsewhere(key: string): Promise<{ led: Promise<unknown> }> {
    const leader = suite.cache({ ttl: '10m', l1: false })
    await leader.ready()
    let started = false
    const led = leader.getOrLoad(key, async () => ((started = true), await leaderLoad.promise, 'leader value'))
    await until(() => started, 'the leader to take the lock')
    return { led }
  }

  function waitsOf(cache: Cache): () => number {
    let waits = 0
    cache.on('wait', () => waits++)
    return () => waits
  }

  it('a waiter with nothing to serve rejects with CacheClosedError and close() returns at once, no load', async () => {
    await heldElsewhere('k')
    const waiter = suite.cache({ ttl: '10m', l1: false, waitTimeout: '30s', onWaitTimeout: 'load' })
    await waiter.ready()
    const waits = waitsOf(waiter)
    let loads = 0
    const calls = Array.from({ length: 3 }, (_, i) => waiter.getOrLoad('k', async () => (loads++, `own ${i}`)))
    const other = waiter.getOrLoad('k2-not-held', async () => (loads++, 'free key'))
    expect(await other).toBe('free key')
    await until(() => waits() === 1, 'the waiter to wait on the leader')
    const startedAt = performance.now()
    await waiter.close()
    const closeMs = performance.now() - startedAt
    const settled = await Promise.allSettled(calls)
    for (const result of settled)
      expect(result.status === 'rejected' && result.reason instanceof CacheClosedError).toBe(true)
    expect(loads).toBe(1) // the free key's load only: no waiter ran its loader
    expect(closeMs).toBeLessThan(5_000) // about one round trip; before: the 30 s waitTimeout
  }, 40_000)

  it('a waiter holding a stale copy serves it when close() ends its wait', async () => {
    const waiter = suite.cache({
      ttl: '200ms',
      staleIfError: '10m',
      waitTimeout: '30s',
      lock: { pollInterval: 1_000, maxPollInterval: 1_000 },
    })
    await waiter.ready()
    expect(await waiter.getOrLoad('s', async () => 'old')).toBe('old')
    await new Promise((resolve) => setTimeout(resolve, 300)) // past its ttl: the L1 copy is a fail-safe fallback now
    await heldElsewhere('s')
    const waits = waitsOf(waiter)
    let loads = 0
    const call = waiter.getOrLoad('s', async () => (loads++, 'own'))
    await until(() => waits() === 1, 'the waiter to wait on the leader')
    const startedAt = performance.now()
    await waiter.close()
    expect(performance.now() - startedAt).toBeLessThan(5_000)
    expect(await call).toBe('old')
    expect(loads).toBe(0)
  }, 40_000)

  // Attacks: close() racing the commit, close() twice, close() before the subscribe is confirmed.
  const answered = (result: PromiseSettledResult<unknown>): boolean =>
    (result.status === 'fulfilled' && result.value === 'leader value') ||
    (result.status === 'rejected' && result.reason instanceof CacheClosedError)

  for (let round = 0; round < 3; round++) {
    it(`close() twice racing the leader's commit (round ${round}): each call the value or CacheClosedError, no loader`, async () => {
      const { led } = await heldElsewhere('k')
      const waiter = suite.cache({ ttl: '10m', l1: false, waitTimeout: '30s', onWaitTimeout: 'load' })
      await waiter.ready()
      let waits = 0
      waiter.on('wait', () => waits++)
      let loads = 0
      const calls = Promise.allSettled(
        Array.from({ length: 5 }, () => waiter.getOrLoad('k', async () => (loads++, 'own'))),
      )
      await until(() => waits >= 1, 'the waiter to wait')
      leaderLoad.open() // the commit is published as close() runs
      if (round === 1) await led
      const startedAt = performance.now()
      await Promise.all([waiter.close(), waiter.close()])
      await waiter.close()
      const settled = await calls
      expect(performance.now() - startedAt).toBeLessThan(5_000)
      for (const result of settled) expect(answered(result), JSON.stringify(result)).toBe(true)
      expect(loads).toBe(0)
      expect(await led).toBe('leader value')
    }, 30_000)
  }

  it('close() in the same tick as the wait starts (before its subscribe is confirmed): CacheClosedError, no loader, close() prompt', async () => {
    await heldElsewhere('m')
    const waiter = suite.cache({ ttl: '10m', l1: false, waitTimeout: '30s', onWaitTimeout: 'load' })
    await waiter.ready()
    let loads = 0
    for (let i = 0; i < 5; i++) {
      const call = waiter
        .getOrLoad('m', async () => (loads++, 'own'))
        .then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        )
      if (i === 4) {
        const startedAt = performance.now()
        await Promise.all([waiter.close(), waiter.close()])
        const outcome = await call
        expect(performance.now() - startedAt).toBeLessThan(5_000)
        expect('error' in outcome && outcome.error instanceof CacheClosedError, JSON.stringify(outcome)).toBe(true)
      } else {
        void call
      }
    }
    expect(loads).toBe(0)
  }, 30_000)
})
