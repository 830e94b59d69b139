/**
 * Fast-check sequences on the Redis semaphore: random mixes of acquire(n), tryAcquire(n)
 * and acquires aborted while waiting, from three Locks at once. Counted by the protected
 * section itself: never more than N permits inside; afterwards all N come back at once.
 */
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { sleep } from '../../support/timing.js'

describe('semaphore sequences (Redis)', () => {
  const redis = useRedisServer()
  const opened: Locks[] = []
  let runs = 0
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()))
  })

  it('random acquire(n) / hold / abort / tryAcquire from three Locks: never more than N held, all permits back after', async () => {
    const clients = [0, 1, 2].map(() => {
      const locks = createLocks({ redis: redis.server().client(), lease: '5s', namespace: 'seq' })
      opened.push(locks)
      return locks
    })
    const PERMITS = 3
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            who: fc.integer({ min: 0, max: 2 }),
            count: fc.integer({ min: 1, max: PERMITS }),
            kind: fc.constantFrom('acquire', 'try', 'abort'),
            holdMs: fc.integer({ min: 0, max: 4 }),
            abortMs: fc.integer({ min: 0, max: 3 }),
          }),
          { minLength: 2, maxLength: 12 },
        ),
        async (calls) => {
          const name = `s${++runs}`
          let inside = 0
          let peak = 0
          const hold = async (count: number, ms: number) => {
            inside += count
            peak = Math.max(peak, inside)
            await sleep(ms)
            inside -= count
          }
          await Promise.all(
            calls.map(async ({ who, count, kind, holdMs, abortMs }) => {
              const sem = clients[who]!.semaphore(name, { permits: PERMITS })
              if (kind === 'try') {
                const held = await sem.tryAcquire(count)
                if (held) await hold(count, holdMs).finally(() => held.release())
                return
              }
              const abort = new AbortController()
              if (kind === 'abort') setTimeout(() => abort.abort(), abortMs)
              const held = await sem.acquire(count, { wait: '10s', signal: abort.signal }).catch((error: unknown) => {
                if (kind !== 'abort') throw error
              })
              if (held) await hold(count, holdMs).finally(() => held.release())
            }),
          )
          expect(peak).toBeLessThanOrEqual(PERMITS)
          // Every permit is back: all N at once, within a bound (a waiter's line exit may land a moment later).
          const all = await clients[0]!.semaphore(name, { permits: PERMITS }).acquire(PERMITS, { wait: '2s' })
          await all.release()
        },
      ),
      { numRuns: 30 },
    )
  })
})
