/**
 * Issue 9.9: the bytes buffered by captures are bounded across requests. Past the budget a
 * capture is released: its client gets the whole response, streamed, uncached.
 */
import { describe, expect, it } from 'vitest'
import { cacheRoute, createCaptureBudget, DEFAULT_CAPTURE_BUDGET_BYTES } from '../../src/express/index.js'
import { InvalidArgumentError } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { raw, sleep, useRouteHarness } from './helpers.js'

describe.skipIf(!redisAvailable)('issue 9.9: capture budget', () => {
  const { route, cache } = useRouteHarness()

  it('past the budget, captures stream to their client uncached; the budget is given back; later ones are stored again', async () => {
    const budget = createCaptureBudget(100_000)
    const server = await route(
      async (req, res) => {
        res.type('text')
        for (let i = 0; i < 6; i++) {
          res.write(`${req.query.i}`.repeat(10_000)) // 6 × 10 kB: two captures at once do not fit
          await sleep(10)
        }
        res.end()
      },
      { captureBudget: budget },
    )
    const burst = await Promise.all([0, 1, 2, 3].map((i) => raw(server.port, `/r?i=${i}`)))
    for (const [i, res] of burst.entries()) expect(res.body.toString()).toBe(`${i}`.repeat(60_000))
    const statuses = burst.map((res) => res.headers['x-cache'])
    expect(statuses).toContain('MISS')
    expect(statuses).toContain('BYPASS')
    expect(budget.used).toBe(0)
    // Over budget is a moment, not a property of the URL: no hit-for-miss.
    const spilled = statuses.indexOf('BYPASS')
    expect((await raw(server.port, `/r?i=${spilled}`)).headers['x-cache']).toBe('MISS')
    expect((await raw(server.port, `/r?i=${spilled}`)).headers['x-cache']).toBe('HIT')
  })

  it('is validated, and defaults to 64 MiB', async () => {
    await route((_req, res) => void res.end())
    expect(DEFAULT_CAPTURE_BUDGET_BYTES).toBe(64 * 1024 * 1024)
    expect(() => createCaptureBudget(-1)).toThrow(InvalidArgumentError)
    expect(() => cacheRoute(cache(), { ttl: '1s', captureBudget: 1000 as never })).toThrow(/captureBudget/)
    expect(() => cacheRoute(cache(), { ttl: '1s', negativeTtl: '1s' } as never)).toThrow(/negativeTtl/)
  })
})
