/** The arithmetic behind the load report: binning, peaks, Zipf sampling. Pure, no processes. */
import { describe, expect, it } from 'vitest'
import { binsFromStart, peakPerSecond, ratePerSecond } from '../../load/stampede/results.js'
import { zipfSampler } from '../../load/stampede/zipf.js'

describe('load results arithmetic', () => {
  it('re-indexes absolute 100 ms bins from the traffic start', () => {
    const start = 1_000_000 // ms; bin 10000 starts exactly there
    const bins = { 10000: 3, 10001: 1, 10012: 2, 9999: 4 /* just before: counted in bin 0 */ }
    const out = binsFromStart(bins, start, 2_000)
    expect(out).toHaveLength(20)
    expect(out[0]).toBe(7)
    expect(out[1]).toBe(1)
    expect(out[12]).toBe(2)
    expect(out.reduce((a, b) => a + b, 0)).toBe(10)
  })

  it('finds the busiest sliding second, not just aligned ones', () => {
    // 5 queries at 0.9 s and 5 at 1.0 s: aligned seconds show 5 each, the real peak is 10.
    const per100ms = [0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 0, 0]
    expect(peakPerSecond(per100ms)).toBe(10)
  })

  it('expresses bucket counts as a per-second rate', () => {
    expect(ratePerSecond([1, 1, 2, 0], 200)).toEqual([10, 10])
  })

  it('samples Zipf-like: key 1 is the most popular, every key is in range', () => {
    let seed = 42
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31
    const next = zipfSampler(1000, 1, random)
    const counts = new Map<number, number>()
    let outOfRange = 0
    for (let i = 0; i < 20_000; i++) {
      const k = next()
      if (!Number.isInteger(k) || k < 1 || k > 1000) outOfRange++
      counts.set(k, (counts.get(k) ?? 0) + 1)
    }
    expect(outOfRange).toBe(0)
    const top = counts.get(1)!
    // P(1) = 1 / H(1000) ≈ 13.4%
    expect(top / 20_000).toBeGreaterThan(0.11)
    expect(top / 20_000).toBeLessThan(0.16)
    expect(top).toBeGreaterThan(counts.get(2)!)
  })
})
