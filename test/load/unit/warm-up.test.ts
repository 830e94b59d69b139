/** When the load harness's warm-up stops (load/stampede/warm-up.ts): pure, no processes. */
import { describe, expect, it } from 'vitest'
import { hasSettled } from '../../../load/stampede/warm-up.js'

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
