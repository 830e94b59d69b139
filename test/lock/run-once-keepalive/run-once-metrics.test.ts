/**
 * `runOnce()` reports like the mutex, keyed by the job's name: a claim taken is one
 * `acquired` and ends one `released` (the run ended) or one `lost` (its signal aborted
 * first: lockAtMostFor passed without keepAlive); a tick another instance holds is one
 * `busy`. The same through `instrumentLocks()` (stampede-guard/otel).
 */
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/lock/index.js'
import { instrumentLocks } from '../../../src/observability/index.js'
import { LOCK_ACQUIRES, LOCK_HOLD_DURATION, LOCK_LOST } from '../../../src/observability/locks.js'
import { countOf, metricsHarness, valueOf } from '../../support/otel.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { abortReason, gate, until } from '../../support/timing.js'

describe('runOnce events and metrics', () => {
  const redis = useRedisServer()

  it('one acquired + released per run, one busy per instance that skipped the tick, one lost past lockAtMostFor', async () => {
    const metrics = metricsHarness()
    const locks = createLocks({ redis: redis.server().client(), namespace: 'ro-otel' })
    const other = createLocks({ redis: redis.server().client(), namespace: 'ro-otel' })
    const events: string[] = []
    for (const source of [locks, other])
      for (const event of ['acquired', 'busy', 'released', 'lost'] as const)
        source.on(event, (e) => events.push(`${event} ${e.key}`))
    const instrumentation = instrumentLocks(locks, { meter: metrics.provider.getMeter('test') })
    try {
      const release = gate()
      let started = false
      const run = locks.runOnce(
        'tick',
        async () => {
          started = true
          await release.promise
        },
        { lockAtMostFor: '10s' },
      )
      await until(() => started, 'the run to start')
      expect(await other.runOnce('tick', () => {}, { lockAtMostFor: '10s' })).toEqual({ ran: false })
      release.open()
      expect(await run).toMatchObject({ ran: true })
      expect(events).toEqual(['acquired tick', 'busy tick', 'released tick'])

      // Past lockAtMostFor (no keepAlive) the run's signal aborts: the claim is lost, not released.
      events.length = 0
      await locks.runOnce('slow', ({ signal }) => abortReason(signal, 'lockAtMostFor to pass'), {
        lockAtMostFor: 300,
      })
      expect(events).toEqual(['acquired slow', 'lost slow'])

      const m = await metrics.collect()
      const series = { 'stampede_guard.lock.backend': 'redis' }
      expect(valueOf(m, LOCK_ACQUIRES, { ...series, 'stampede_guard.lock.result': 'acquired' })).toBe(2)
      expect(valueOf(m, LOCK_ACQUIRES, { ...series, 'stampede_guard.lock.result': 'busy' })).toBe(0) // other's, not instrumented
      expect(valueOf(m, LOCK_LOST, series)).toBe(1)
      expect(countOf(m, LOCK_HOLD_DURATION, { ...series, 'stampede_guard.lock.end': 'released' })).toBe(1)
      expect(countOf(m, LOCK_HOLD_DURATION, { ...series, 'stampede_guard.lock.end': 'lost' })).toBe(1)
    } finally {
      instrumentation.stop()
      await Promise.all([locks.close(), other.close()])
      await metrics.shutdown()
    }
  })
})
