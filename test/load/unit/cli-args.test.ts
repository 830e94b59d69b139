/** `npm run load` argument parsing (load/stampede/cli-args.ts): pure, no processes. */
import { describe, expect, it } from 'vitest'
import { parseCliArgs } from '../../../load/stampede/cli-args.js'

describe('load: command-line counts', () => {
  it('refuses a count that would round to zero runs, workers or connections', () => {
    expect(() => parseCliArgs(['--repeat', '0.4'])).toThrow(/--repeat must be a whole number/)
    expect(() => parseCliArgs(['--workers', '0.4'])).toThrow(/--workers/)
    expect(() => parseCliArgs(['--connections', '2.5'])).toThrow(/--connections/)
    expect(parseCliArgs(['--repeat', '3']).repeat).toBe(3)
  })

  it('reads --warm-up in seconds, 0 for none, 30 s by default', () => {
    expect(parseCliArgs([]).warmUpMs).toBe(30_000)
    expect(parseCliArgs(['--warm-up', '0']).warmUpMs).toBe(0)
    expect(parseCliArgs(['--warm-up', '6']).warmUpMs).toBe(6_000)
    expect(() => parseCliArgs(['--warm-up', '-1'])).toThrow(/--warm-up/)
  })
})
