/**
 * loaderConcurrency with a stale value in hand: while another process holds every loader
 * permit, a caller of a key in grace (staleTtl) is served the stale value at once, neither
 * waiting for a permit nor loading; the key's background refresh waits in line and loads
 * once the permit comes back. Counted: the holder's load is still running (the resource's
 * `inside` counter) when the stale answer arrives, and this process's loads are counted.
 */
import { describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { useWorkerSuite } from '../support/worker-suite.js'
import type { ColdKeysReport, ColdKeysRequest } from '../fixtures/loader-cap-worker.js'
import { redisAvailable } from '../support/redis.js'
import { until } from '../support/timing.js'

describe.skipIf(!redisAvailable)('loaderConcurrency: a stale value past a full cap', () => {
  const suite = useWorkerSuite(new URL('../fixtures/loader-cap-worker.ts', import.meta.url))

  it('a key in grace is served stale at once while another process holds the only permit: 0 loads until the permit is back, then 1', async () => {
    const options = { ttl: 200, staleTtl: '1m', loaderConcurrency: { limit: 1 } } as const
    const redis = suite.server().client()
    const cache = createCache({ redis, ...options })
    const admin = suite.redis()
    let loads = 0
    const load = async () => `v${++loads}`
    expect(await cache.getOrLoad('k', load)).toBe('v1')
    const [holder] = await suite.spawn(1, { CACHE_OPTIONS: JSON.stringify(options) })
    // The other process takes the fleet's one permit for a slow load (counted in `inside` while it runs).
    const holding = holder!.request<ColdKeysReport>(
      { keys: ['slow'], loaderMs: 8_000, waitTimeout: 30_000 } satisfies ColdKeysRequest,
      60_000,
    )
    await until(async () => (await admin.get('inside')) === '1', 'the other process to hold the permit', 30_000)
    await new Promise((resolve) => setTimeout(resolve, 250)) // past ttl: 'k' is in grace
    const served = await cache.getOrLoad('k', load, { waitTimeout: 30_000 })
    // Answered while the permit is still the other process's: it did not wait for it.
    expect(await admin.get('inside')).toBe('1')
    expect(served).toBe('v1') // the stale value
    expect(loads).toBe(1) // and this process did not load past the cap
    // A second caller meanwhile: stale too, still no load.
    expect(await cache.getOrLoad('k', load, { waitTimeout: 30_000 })).toBe('v1')
    // A cache with an empty L1 (as another instance would be) finds the stale copy in Redis: stale too, no load.
    const otherClient = suite.server().client()
    const other = createCache({ redis: otherClient, ...options })
    expect(await other.getOrLoad('k', load, { waitTimeout: 30_000 })).toBe('v1')
    expect(loads).toBe(1)
    expect(await admin.get('inside')).toBe('1')
    expect((await holding).values).toBe(1)
    // The permit is back: the refresh that waited in line loads once.
    await until(() => loads === 2, 'the background refresh to load once the permit is back', 30_000)
    await until(async () => (await cache.getOrLoad('k', load)) === 'v2', 'the refreshed value', 10_000)
    expect(loads).toBe(2)
    console.log(
      `[loaderConcurrency stale] served stale 3 times (2 callers, 1 cold L1) while the cap was full; loads ${loads - 1} then`,
    )
    await Promise.all([cache.close(), other.close()])
    redis.disconnect()
    otherClient.disconnect()
  }, 90_000)
})
