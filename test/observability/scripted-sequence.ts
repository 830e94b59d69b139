/**
 * The scripted sequence both exporters' tests check: 1 miss, 3 hits, 1 stale, 1 error.
 * Every event it causes is known, so the counts can be asserted exactly.
 */
import { expect } from 'vitest'
import type { Cache } from '../../src/index.js'
import { sleep, until } from '../support/timing.js'

export class PriceServiceDown extends Error {
  override name = 'PriceServiceDown'
}

/** Cache options the sequence needs: a 2 s ttl (the 3 hits fall well within it), a long grace to be served stale from. */
export const SEQUENCE_CACHE_OPTIONS = { ttl: '2s', staleTtl: '1h' } as const
const TTL_MS = 2_000

/**
 * 1. a miss on product:1: this caller loads it (miss, leader, load ok);
 * 2. 3 L1 hits on it;
 * 3. past its 2 s ttl, 1 stale answer (grace), refreshed in the background (leader, load ok);
 * 4. 1 error: a miss on product:2 whose loader throws PriceServiceDown (miss, leader, load error).
 * `around` wraps each call, e.g. in a span of its own as a request handler's would be.
 */
export async function runScriptedSequence(
  cache: Cache,
  around: <T>(step: string, call: () => Promise<T>) => Promise<T> = (_, call) => call(),
): Promise<void> {
  let loads = 0
  const price = async () => ({ cents: 100 + loads++ })
  expect((await around('miss', () => cache.getOrLoadResult('product:1', price))).outcome).toBe('loaded')
  const loadedAt = performance.now()
  for (let i = 0; i < 3; i++)
    expect((await around(`hit ${i}`, () => cache.getOrLoadResult('product:1', price))).outcome).toBe('hit')
  // Waiting out the ttl is the point here: the copy must be past it to be served stale.
  await sleep(Math.max(0, TTL_MS + 100 - (performance.now() - loadedAt)))
  expect((await around('stale', () => cache.getOrLoadResult('product:1', price))).outcome).toBe('stale')
  await until(() => cache.stats().load === 2, 'the background refresh')
  await expect(
    around('error', () =>
      cache.getOrLoad('product:2', async (): Promise<never> => {
        throw new PriceServiceDown('price service is down')
      }),
    ),
  ).rejects.toThrow(PriceServiceDown)
  expect(loads).toBe(2)
}
