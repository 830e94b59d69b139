/**
 * `coalesce()` over generated sequences (fast-check), on Redis, three `Locks`: for each
 * run, some number of triggers (0-3, from any instance) arrive while it runs. Each run is
 * held open until its triggers have been answered `{ ran: false }`, so what arrived
 * during which run is known, not timed. Property: never two runs at once, no trigger ever
 * runs the job itself, and a run with at least one trigger during it is followed by
 * exactly one more run (a run with none is the last).
 */
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { gate, until } from '../../support/timing.js'

describe('coalesce sequences (fast-check)', () => {
  const redis = useRedisServer()
  let instances: Locks[] = []
  let count = 0
  beforeAll(() => {
    instances = [0, 1, 2].map(() => createLocks({ redis: redis.server().client(), namespace: 'co-fc', lease: '5s' }))
  })
  afterAll(async () => {
    await Promise.all(instances.map((locks) => locks.close()))
  })

  it('never two runs at once; triggers during a run give exactly one run more', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 3 }), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 0, max: 2 }),
        async (triggersPerRun, runner) => {
          const name = `seq-${++count}`
          let running = 0
          let most = 0
          let triggerRuns = 0
          const started: number[] = []
          const gates = triggersPerRun.map(() => gate())
          const call = instances[runner]!.coalesce(name, async ({ run }) => {
            running++
            most = Math.max(most, running)
            started.push(run)
            // Held open until this run's triggers were answered (runs past the list: none come).
            await (gates[run]?.promise ?? Promise.resolve())
            running--
          })
          let settled: unknown
          const done = call.then((r) => (settled = r))
          for (let run = 0; run < triggersPerRun.length; run++) {
            await until(() => started.length > run || !!settled, `run ${run} to start`, 10_000)
            if (started.length <= run) break // the job stopped: no run with this index
            const results = await Promise.all(
              triggersPerRun[run]!.map((who) => instances[who]!.coalesce(name, () => void triggerRuns++)),
            )
            expect(results.every((r) => !r.ran)).toBe(true)
            gates[run]!.open()
          }
          const result = await done
          // Runs: the first, then one more per run that had a trigger, up to the first run without one.
          const firstQuiet = triggersPerRun.findIndex((triggers) => triggers.length === 0)
          const expected = firstQuiet === -1 ? triggersPerRun.length + 1 : firstQuiet + 1
          expect(result).toMatchObject({ ran: true, runs: expected })
          expect(started).toEqual([...Array(expected).keys()])
          expect(most).toBe(1)
          expect(triggerRuns).toBe(0)
        },
      ),
      { numRuns: 25 },
    )
  }, 120_000)
})
