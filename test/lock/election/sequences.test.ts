/**
 * Leader election over generated sequences (fast-check), on Redis, three candidates each
 * on a `Locks` of its own: campaign, resign, and kill (its `Locks` closed, as a process
 * that ends: the leadership is deposed, the campaign rejected; a new `Locks` takes its
 * place). After every step the candidates are read: never two of them `leading` at once,
 * every term won is greater than every term before it, and a kill leaves its candidate
 * leading nothing. At the end, with the leader gone, a waiting campaign is elected.
 */
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createLocks, type Leadership, type Locks } from '../../../src/lock/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { sleep, until } from '../../support/timing.js'

type Step = { op: 'campaign' | 'resign' | 'kill'; who: number }

interface Candidate {
  locks: Locks
  campaign?: Promise<unknown>
  leadership?: Leadership
}

describe('leader election sequences (fast-check)', () => {
  const redis = useRedisServer()
  let count = 0
  const newLocks = () => createLocks({ redis: redis.server().client(), namespace: 'el-fc', lease: '5s' })

  it('campaign / resign / kill in any order: never two leaders, terms only grow', async () => {
    const totals = { terms: 0, kills: 0 }
    await fc.assert(
      fc.asyncProperty(
        // Campaigns come twice as often as resign or kill: more terms per sequence.
        fc.array(
          fc.record({
            op: fc.constantFrom('campaign', 'campaign', 'resign', 'kill'),
            who: fc.integer({ min: 0, max: 2 }),
          }),
          { minLength: 1, maxLength: 10 },
        ),
        async (steps: Step[]) => {
          const name = `seq-${++count}`
          const candidates: Candidate[] = [0, 1, 2].map(() => ({ locks: newLocks() }))
          const terms: bigint[] = []
          let termsBackwards = 0
          const leaders = () => candidates.filter((c) => c.leadership?.leading)
          const campaign = (c: Candidate, i: number) => {
            c.campaign = c.locks.elect(name, { id: `c${i}` }).then(
              (leadership) => {
                // Every term won is greater than every one before it (checked after each step).
                if (!terms.every((term) => leadership.term > term)) termsBackwards++
                terms.push(leadership.term)
                c.leadership = leadership
                c.campaign = undefined
              },
              () => (c.campaign = undefined), // killed while campaigning
            )
          }
          try {
            for (const { op, who } of steps) {
              const c = candidates[who]!
              if (op === 'campaign' && !c.campaign && !c.leadership?.leading) campaign(c, who)
              if (op === 'resign' && c.leadership) {
                await c.leadership.resign()
                c.leadership = undefined
              }
              if (op === 'kill') {
                const { leadership, locks } = c
                await locks.close()
                expect(leadership?.leading ?? false).toBe(false)
                await c.campaign
                candidates[who] = { locks: newLocks() }
              }
              await sleep(10) // a waiting campaign may take the lock a step gave back
              expect(leaders().length).toBeLessThanOrEqual(1)
              expect(termsBackwards).toBe(0)
            }
            // Liveness: with every leader gone, one of the waiting campaigns is elected.
            for (const c of candidates) if (c.leadership) await c.leadership.resign()
            for (const c of candidates) if (c.leadership && !c.leadership.leading) c.leadership = undefined
            if (candidates.some((c) => c.campaign)) {
              await until(() => leaders().length === 1, 'a waiting campaign to be elected', 10_000)
              expect(leaders().length).toBe(1)
            }
            expect(termsBackwards).toBe(0)
            totals.terms += terms.length
            totals.kills += steps.filter((s) => s.op === 'kill').length
          } finally {
            await Promise.all(candidates.map((c) => c.locks.close()))
          }
        },
      ),
      { numRuns: 30 },
    )
    console.log(
      `[election sequences] 30 sequences: ${totals.terms} terms won, ${totals.kills} kills, never two leaders`,
    )
  }, 180_000)
})
