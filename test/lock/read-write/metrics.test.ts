/**
 * Read-write locks through `instrumentLocks()` (stampede-guard/otel), like the mutex: each
 * read or write hold is one acquisition, a wait that runs out is one busy, a hold whose
 * lease is gone is one lost, and hold durations end `released` or `lost`; keyed by the name.
 */
import { describe, expect, it } from 'vitest'
import { LockBusyError, LockUpgradeError } from '../../../src/errors.js'
import { createLocks } from '../../../src/lock/index.js'
import { instrumentLocks } from '../../../src/observability/index.js'
import { LOCK_ACQUIRES, LOCK_HOLD_DURATION, LOCK_LOST, LOCK_WAIT_DURATION } from '../../../src/observability/locks.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { metricsHarness, countOf, valueOf } from '../../support/otel.js'
import { abortReason } from '../../support/timing.js'

describe('read-write lock metrics (instrumentLocks)', () => {
  const redis = useRedisServer()

  it('reads and writes count as acquisitions, a refused write as busy, a reader deposed as lost', async () => {
    const metrics = metricsHarness()
    const locks = createLocks({ redis: redis.server().client(), namespace: 'rw-otel', lease: 3_000 })
    const other = createLocks({ redis: redis.server().client(), namespace: 'rw-otel', lease: 3_000 })
    const labels = (key: string) => (key === 'config' ? 'config' : undefined)
    const instrumentation = instrumentLocks(locks, { meter: metrics.provider.getMeter('test'), keyLabel: labels })
    const rw = locks.readWrite('config')
    try {
      await rw.read(async () => {
        await rw.read(() => {}) // the chain's own read: no acquisition
        await expect(rw.acquireWrite({ wait: 0 })).rejects.toBeInstanceOf(LockUpgradeError) // an upgrade: refused before any acquisition
      })
      await rw.write(() => {})
      const reader = await other.readWrite('config').acquireRead()
      await expect(rw.acquireWrite({ wait: 50 })).rejects.toBeInstanceOf(LockBusyError)
      await reader.release()
      const deposed = await rw.acquireRead()
      // The hold's lease gone from the store: its next renewal finds it so, and it is lost.
      await redis.admin().flushdb()
      await abortReason(deposed.signal, 'the reader to be deposed')
      await deposed.release().catch(() => {})

      const m = await metrics.collect()
      const series = { 'stampede_guard.lock.backend': 'redis' }
      expect(valueOf(m, LOCK_ACQUIRES, { ...series, 'stampede_guard.lock.result': 'acquired' })).toBe(3)
      expect(valueOf(m, LOCK_ACQUIRES, { ...series, 'stampede_guard.lock.result': 'busy' })).toBe(1)
      expect(countOf(m, LOCK_WAIT_DURATION, { ...series, 'stampede_guard.lock.result': 'busy' })).toBe(1)
      expect(valueOf(m, LOCK_LOST, series)).toBe(1)
      expect(countOf(m, LOCK_HOLD_DURATION, { ...series, 'stampede_guard.lock.end': 'released' })).toBe(2)
      expect(countOf(m, LOCK_HOLD_DURATION, { ...series, 'stampede_guard.lock.end': 'lost' })).toBe(1)
      // Keyed by the read-write lock's name, as the events are.
      const keys = (m.get(LOCK_ACQUIRES)!.dataPoints as { attributes: Record<string, unknown> }[]).map(
        (point) => point.attributes['stampede_guard.key.label'],
      )
      expect(new Set(keys)).toEqual(new Set(['config']))
    } finally {
      instrumentation.stop()
      await Promise.all([locks.close(), other.close()])
      await metrics.shutdown()
    }
  })
})
