/** When the load harness's warm-up stops (load/stampede/warm-up.ts): pure, no processes. */
import { describe, expect, it } from 'vitest'
import { hasSettled, startsAnotherPass } from '../../../load/stampede/warm-up.js'

describe('load: warm-up settling', () => {
  it('needs two passes, the last within the tolerance of the one before', () => {
    expect(hasSettled([], 0.1)).toBe(false)
    expect(hasSettled([10_000], 0.1)).toBe(false)
    expect(hasSettled([7_000, 10_000], 0.1)).toBe(false)
    expect(hasSettled([7_000, 10_000, 10_900], 0.1)).toBe(true)
    expect(hasSettled([10_000, 9_000], 0.1)).toBe(true)
    expect(hasSettled([10_000, 8_999], 0.1)).toBe(false)
  })

  it('never counts two empty passes as settled', () => {
    expect(hasSettled([0, 0], 0.1)).toBe(false)
  })
})

describe('load: warm-up budget', () => {
  it('runs the first pass whenever there is a budget, even one shorter than a pass', () => {
    expect(startsAnotherPass([], 0, 8_000, 3_000, 0.1)).toBe(true)
    expect(startsAnotherPass([], 0, 8_000, 0, 0.1)).toBe(false)
    expect(startsAnotherPass([], 0, 0, 30_000, 0.1)).toBe(false) // no modes: no pass, no spinning
  })

  it('runs a later pass only if it ends within the budget, and none once settled', () => {
    expect(startsAnotherPass([7_000], 8_100, 8_000, 30_000, 0.1)).toBe(true)
    expect(startsAnotherPass([7_000, 9_000], 16_200, 8_000, 30_000, 0.1)).toBe(true)
    expect(startsAnotherPass([7_000, 9_000, 9_500], 24_300, 8_000, 30_000, 0.1)).toBe(false)
    expect(startsAnotherPass([7_000, 9_000], 22_100, 8_000, 30_000, 0.1)).toBe(false)
  })
})
