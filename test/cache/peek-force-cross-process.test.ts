import { describe, expect, it } from 'vitest'
import { redisAvailable } from '../support/redis.js'
import type { Worker } from '../support/workers.js'
import { until } from '../support/timing.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/cache-api-worker.ts', import.meta.url)

interface Loaded {
  value: string
  by: number
}

describe.skipIf(!redisAvailable)('get and forceRefresh across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const redis = suite.redis

  function spawn(count: number, cacheOptions: object = {}): Promise<Worker[]> {
    return suite.spawn(count, { CACHE_OPTIONS: JSON.stringify(cacheOptions) })
  }

  async function loads(key: string): Promise<number> {
    return Number((await redis().get(`loads:${key}`)) ?? 0)
  }

  const subscribers = async (channel: string) => ((await redis().pubsub('NUMSUB', channel)) as [string, number])[1]

  it('4 processes × 5 forced calls at once on a fresh key: 1 load, every caller and every L1 gets the new value', async () => {
    const group = await spawn(4)
    await group[0]!.request({ op: 'load', key: 'hot', value: 'old' })
    // Every process holds the old value fresh in L1.
    for (const worker of group) expect(await worker.request({ op: 'peek', key: 'hot' })).toMatchObject({ has: true })
    expect(await loads('hot')).toBe(1)
    const forced = Promise.all(
      group.map((w) =>
        w.request<{ value: Loaded; outcome: string }[]>({
          op: 'force',
          key: 'hot',
          value: 'new',
          calls: 5,
          releaseKey: 'go:hot',
        }),
      ),
    )
    // The forced load has started, and the other three processes wait on its lock (subscribed):
    // only then does the loader finish, so "at once" holds however busy the machine is.
    await until(async () => (await loads('hot')) === 2, 'the forced load to start', 15_000)
    await until(
      async () => (await subscribers('sg:{k:hot}:ch')) === 3,
      'three processes to wait on the forced load',
      15_000,
    )
    await redis().set('go:hot', '1')
    const results = (await forced).flat()
    expect(results).toHaveLength(20)
    expect(await loads('hot')).toBe(2) // the first load and ONE forced reload
    expect(results.every((r) => r.value.value === 'new')).toBe(true)
    expect(results.filter((r) => r.outcome === 'loaded')).toHaveLength(1)
    for (const worker of group)
      expect(await worker.request({ op: 'peek', key: 'hot' })).toMatchObject({ value: { value: 'new' }, has: true })
  })

  it('a forced reload replaces the old value in the L1 of a process that was not calling (the broadcast)', async () => {
    const [forcer, bystander] = await spawn(2)
    await forcer!.request({ op: 'load', key: 'k', value: 'old' })
    expect(await bystander!.request({ op: 'peek', key: 'k' })).toMatchObject({ value: { value: 'old' } }) // now in its L1
    await forcer!.request({ op: 'force', key: 'k', value: 'new', calls: 1 })
    await until(
      async () => (await bystander!.request<{ value: Loaded }>({ op: 'peek', key: 'k' })).value.value === 'new',
      'the bystander to drop its old copy',
      5_000,
    )
    expect(await loads('k')).toBe(2)
  })

  it('wrap: 4 processes × 20 calls of a wrapped function over 2 argument values run it once per value', async () => {
    const group = await spawn(4)
    const results = await Promise.all(
      group.map((w) => w.request<{ id: string; by: number }[]>({ op: 'wrap', ids: ['a', 'b'], calls: 20 })),
    )
    expect(results.flat()).toHaveLength(80)
    expect(await loads('user:a')).toBe(1)
    expect(await loads('user:b')).toBe(1)
    for (const id of ['a', 'b']) {
      const producers = new Set(
        results
          .flat()
          .filter((r) => r.id === id)
          .map((r) => r.by),
      )
      expect(producers.size).toBe(1) // every caller got the one load's result
    }
  })
})
