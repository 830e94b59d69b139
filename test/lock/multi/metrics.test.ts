/**
 * `withLocks` through `instrumentLocks()` (stampede-guard/otel), like the mutex: every key
 * taken is one acquisition and one hold that ends `released` or `lost`; a key still held
 * elsewhere when the wait runs out is one busy, for that key only, and a key taken before
 * it (one key at a time) still ends `released`. On Redis in one step (acquire-many.lua),
 * and one key at a time (a backend without the one-step acquisition).
 */
import { afterEach, describe, expect, it } from 'vitest'
import { LockBusyError, LockLostError } from '../../../src/errors.js'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { RedisLockBackend } from '../../../src/lock/redis/backend.js'
import { instrumentLocks } from '../../../src/observability/index.js'
import { LOCK_ACQUIRES, LOCK_HOLD_DURATION, LOCK_LOST } from '../../../src/observability/locks.js'
import { countOf, metricsHarness, valueOf, type MetricsHarness } from '../../support/otel.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { abortReason } from '../../support/timing.js'

const ACQUIRED = { 'stampede_guard.lock.result': 'acquired' }
const BUSY = { 'stampede_guard.lock.result': 'busy' }
const key = (label: string) => ({ 'stampede_guard.key.label': label })

describe('multi-key lock metrics (instrumentLocks)', () => {
  const redis = useRedisServer()
  const opened: Locks[] = []
  let metrics: MetricsHarness
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()))
    await metrics?.shutdown()
  })
  const instrumented = (locks: Locks) => {
    opened.push(locks)
    metrics = metricsHarness()
    // Every key its own series: the test's few keys, labelled by themselves.
    return instrumentLocks(locks, { meter: metrics.provider.getMeter('test'), keyLabel: (k) => k })
  }

  it('in one step: each key one acquisition and one hold; busy names the held key; a key lost mid-call is one lost', async () => {
    const locks = createLocks({ redis: redis.server().client(), namespace: 'mo', lease: 3_000 })
    const other = createLocks({ redis: redis.server().client(), namespace: 'mo', lease: 3_000 })
    opened.push(other)
    const instrumentation = instrumented(locks)
    await locks.withLocks(['c', 'a', 'b'], () => {})
    const blocker = await other.acquire('b')
    await expect(locks.withLocks(['a', 'b'], () => {}, { wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await blocker.release()
    // The call reports the loss, as withLock does.
    await expect(
      locks.withLocks(['d', 'e'], async ({ signal }) => {
        await redis.admin().del('mo:{l:d}:lock') // d's lease gone: its next renewal finds it so
        await abortReason(signal, 'the call to learn d is lost')
      }),
    ).rejects.toBeInstanceOf(LockLostError)
    const m = await metrics.collect()
    instrumentation.stop()
    for (const k of ['a', 'b', 'c', 'd', 'e'])
      expect(valueOf(m, LOCK_ACQUIRES, { ...ACQUIRED, ...key(k) }), `acquired ${k}`).toBe(1)
    expect(valueOf(m, LOCK_ACQUIRES, { ...BUSY, ...key('b') })).toBe(1)
    expect(valueOf(m, LOCK_ACQUIRES, { ...BUSY, ...key('a') })).toBe(0) // one step: nothing of a was taken
    expect(valueOf(m, LOCK_LOST, key('d'))).toBe(1)
    expect(valueOf(m, LOCK_LOST, key('e'))).toBe(0)
    const ended = (k: string, end: string) =>
      countOf(m, LOCK_HOLD_DURATION, { ...key(k), 'stampede_guard.lock.end': end })
    expect(['a', 'b', 'c', 'e'].map((k) => ended(k, 'released'))).toEqual([1, 1, 1, 1])
    expect(ended('d', 'lost')).toBe(1)
  })

  it('one key at a time: a busy second key is one busy, and the first key taken is one acquisition released', async () => {
    const backend = new RedisLockBackend(redis.server().client(), { namespace: 'mo1', commandTimeoutMs: 1_000 })
    const locks = createLocks({
      backend: { name: 'one-by-one', acquire: (r) => backend.acquire(r), close: () => backend.close() },
    })
    const other = createLocks({ redis: redis.server().client(), namespace: 'mo1' })
    opened.push(other)
    const instrumentation = instrumented(locks as unknown as Locks)
    const blocker = await other.acquire('b')
    await expect(locks.withLocks(['b', 'a'], () => {}, { wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await blocker.release()
    const m = await metrics.collect()
    instrumentation.stop()
    const series = { 'stampede_guard.lock.backend': 'one-by-one' }
    expect(valueOf(m, LOCK_ACQUIRES, { ...series, ...ACQUIRED, ...key('a') })).toBe(1)
    expect(valueOf(m, LOCK_ACQUIRES, { ...series, ...BUSY, ...key('b') })).toBe(1)
    expect(valueOf(m, LOCK_ACQUIRES, { ...series, ...ACQUIRED, ...key('b') })).toBe(0)
    expect(countOf(m, LOCK_HOLD_DURATION, { ...series, ...key('a'), 'stampede_guard.lock.end': 'released' })).toBe(1)
    expect(valueOf(m, LOCK_LOST, series)).toBe(0)
  })
})
