/**
 * `coalesce()` reports like the mutex, keyed by the job's name: the claim of a call that
 * runs is one `acquired` and ends one `released` (after its last run) or one `lost` (a
 * run's claim not renewed in time); a trigger that finds the job running is one `busy`.
 * The same through `instrumentLocks()` (stampede-guard/otel).
 */
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/lock/index.js'
import { instrumentLocks } from '../../../src/observability/index.js'
import { LOCK_ACQUIRES, LOCK_HOLD_DURATION, LOCK_LOST } from '../../../src/observability/locks.js'
import { countOf, metricsHarness, valueOf } from '../../support/otel.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { abortReason, gate, until } from '../../support/timing.js'

describe('coalesce events and metrics', () => {
  const redis = useRedisServer()

  it('one acquired + released per call that ran (over all its runs), one busy per trigger that found it running, one lost', async () => {
    const metrics = metricsHarness()
    const locks = createLocks({ redis: redis.server().client(), namespace: 'co-otel', lease: 1_500 })
    const events: string[] = []
    for (const event of ['acquired', 'busy', 'released', 'lost'] as const)
      locks.on(event, (e) => events.push(`${event} ${e.key}`))
    const instrumentation = instrumentLocks(locks, { meter: metrics.provider.getMeter('test') })
    try {
      const release = gate()
      let started = 0
      const first = locks.coalesce('job', async ({ run }) => {
        started++
        if (run === 0) await release.promise
      })
      await until(() => started === 1, 'the first run')
      expect(await locks.coalesce('job', () => {})).toEqual({ ran: false })
      expect(await locks.coalesce('job', () => {})).toEqual({ ran: false })
      release.open()
      expect(await first).toMatchObject({ ran: true, runs: 2 }) // one run more for both triggers
      expect(events).toEqual(['acquired job', 'busy job', 'busy job', 'released job'])

      // A run whose claim is gone from the store: its renewal finds it so, and the claim is lost.
      events.length = 0
      const lostRun = locks.coalesce('lost-job', async ({ signal }) => {
        await redis.admin().del(...(await redis.admin().keys('co-otel*lost-job*')))
        await abortReason(signal, 'the run to be told its claim is gone')
      })
      await lostRun
      expect(events).toEqual(['acquired lost-job', 'lost lost-job'])

      const m = await metrics.collect()
      const series = { 'stampede_guard.lock.backend': 'redis' }
      expect(valueOf(m, LOCK_ACQUIRES, { ...series, 'stampede_guard.lock.result': 'acquired' })).toBe(2)
      expect(valueOf(m, LOCK_ACQUIRES, { ...series, 'stampede_guard.lock.result': 'busy' })).toBe(2)
      expect(valueOf(m, LOCK_LOST, series)).toBe(1)
      expect(countOf(m, LOCK_HOLD_DURATION, { ...series, 'stampede_guard.lock.end': 'released' })).toBe(1)
      expect(countOf(m, LOCK_HOLD_DURATION, { ...series, 'stampede_guard.lock.end': 'lost' })).toBe(1)
    } finally {
      instrumentation.stop()
      await locks.close()
      await metrics.shutdown()
    }
  })
})
