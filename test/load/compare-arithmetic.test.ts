/** The arithmetic of `npm run compare` (load/compare/arithmetic.ts): lock hand-offs and Redis cost per call. Pure, no processes. */
import { describe, expect, it } from 'vitest'
import { commandStats, handoffs, lowerMedianBy, quantile, type Hold } from '../../load/compare/arithmetic.js'

const hold = (process: number, askedAt: number, acquiredAt: number, releasedAt: number): Hold => ({
  process,
  askedAt,
  acquiredAt,
  releasedAt,
})

describe('compare: lock hand-off', () => {
  it('measures from the release to the first waiting process having the lock', () => {
    // 0 holds 0–10; 1 asked at 2 and gets it at 11: a 1 ms hand-off. Then 2 (asked at 12) gets it at 25.
    const { handoffMs, overlaps } = handoffs([hold(0, 0, 0, 10), hold(1, 2, 11, 20), hold(2, 12, 25, 30)])
    expect(handoffMs).toEqual([1, 5])
    expect(overlaps).toBe(0)
  })

  it('keeps a waiter waiting while the releaser takes the lock back (a polling lock starving it)', () => {
    // 1 waits from 1 to 100 while 0 releases at 10, re-takes at 15, releases at 25, re-takes at 30, releases at 40.
    const holds = [hold(0, 0, 0, 10), hold(0, 15, 15, 25), hold(0, 30, 30, 40), hold(1, 1, 100, 110)]
    // Every release while 1 waited counts, up to its acquisition at 100: 90, 75, 60 ms.
    expect(handoffs(holds).handoffMs).toEqual([90, 75, 60])
  })

  it('ignores releases nobody else was waiting for, and counts two holders at once', () => {
    expect(handoffs([hold(0, 0, 0, 10), hold(1, 50, 50, 60)]).handoffMs).toEqual([])
    expect(handoffs([hold(0, 0, 0, 10), hold(1, 1, 5, 12)]).overlaps).toBe(1)
  })

  it('takes quantiles without reordering its input', () => {
    const values = [5, 1, 4, 2, 3]
    expect(quantile(values, 0.5)).toBe(3)
    expect(quantile(values, 0.99)).toBe(5)
    expect(values).toEqual([5, 1, 4, 2, 3])
    expect(quantile([], 0.5)).toBeNaN()
  })
})

describe('compare: Redis cost per call from INFO commandstats', () => {
  const info = (lines: string[]) => ['# Commandstats', ...lines].join('\r\n')

  it("sums the commands a call sends, without the harness's own", () => {
    const stats = commandStats(
      info([
        'cmdstat_get:calls=2000,usec=1800,usec_per_call=0.90,rejected_calls=0,failed_calls=0',
        'cmdstat_pttl:calls=2000,usec=600,usec_per_call=0.30,rejected_calls=0,failed_calls=0',
        'cmdstat_config|resetstat:calls=1,usec=50,usec_per_call=50.00,rejected_calls=0,failed_calls=0',
      ]),
      2_000,
    )
    expect(stats.usec).toBeCloseTo(1.2)
    expect(stats.commands).toBe('get ×1.00 + pttl ×1.00')
  })

  it("counts a script's usec once: the commands it calls are named, not added", () => {
    const stats = commandStats(
      info([
        'cmdstat_evalsha:calls=100,usec=500,usec_per_call=5.00',
        'cmdstat_get:calls=100,usec=90,usec_per_call=0.90',
      ]),
      100,
    )
    expect(stats.usec).toBeCloseTo(5)
    expect(stats.commands).toBe('evalsha ×1.00 (+ get ×1.00)')
  })
})

describe("compare: a peer's median round", () => {
  it('picks the round with the median req/s, the lower middle for an even count', () => {
    const rounds = [{ r: 9 }, { r: 3 }, { r: 5 }]
    expect(lowerMedianBy(rounds, (x) => x.r)).toBe(rounds[2])
    expect(lowerMedianBy([{ r: 4 }, { r: 1 }, { r: 8 }, { r: 6 }], (x) => x.r)).toEqual({ r: 4 })
    expect(() => lowerMedianBy([], (x: number) => x)).toThrow(/no items/)
  })
})
