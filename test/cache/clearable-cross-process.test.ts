import { describe, expect, it } from 'vitest'
import { commandsSinceReset } from '../support/command-stats.js'
import { redisAvailable } from '../support/redis.js'
import { sleep, until } from '../support/timing.js'
import type { Worker } from '../support/workers.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/namespace-worker.ts', import.meta.url)
/** The worker's name for the cache's own keys (no namespace). */
const OWN = ''

describe.skipIf(!redisAvailable)('a clearable cache across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const keys = Array.from({ length: 10 }, (_, i) => `k${i}`)

  function spawn(count: number, cacheOptions: object): Promise<Worker[]> {
    return suite.spawn(count, { CACHE_OPTIONS: JSON.stringify(cacheOptions) })
  }

  /** Loads counted by the workers, per key, across every process. */
  async function loadsPerKey(namespace: string): Promise<number[]> {
    const values = await suite.redis().mget(...keys.map((key) => `loads:${namespace}:${key}`))
    return values.map(Number)
  }

  async function allTold(workers: Worker[], times: number): Promise<void> {
    await until(
      async () =>
        (await Promise.all(workers.map((w) => w.request<number>({ op: 'cleared' })))).every((n) => n === times),
      'every other process to hear of the clear',
      10_000,
    )
  }

  it("3 processes: one clear() (one script) empties the cache's own keys; each key then reloads exactly once, no old value served even with staleTtl", async () => {
    const group = await spawn(3, { clearable: true, staleTtl: '1h', staleIfError: '1h' })
    for (const worker of group)
      expect(await worker.request({ op: 'load', namespace: OWN, keys, value: 'old' })).toEqual(keys.map(() => 'old'))
    expect(await loadsPerKey(OWN)).toEqual(keys.map(() => 1)) // one load per key across 3 processes
    await suite.redis().config('RESETSTAT')
    await group[0]!.request({ op: 'clear' })
    const sent = await commandsSinceReset(suite.redis())
    expect((sent.eval ?? 0) + (sent.evalsha ?? 0)).toBe(1)
    expect(Object.keys(sent).sort()).toEqual(
      [sent.eval ? 'eval' : 'evalsha', 'get', 'publish', 'set', 'time', 'type'].sort(),
    )
    await allTold(group.slice(1), 1)
    // Every process, the one that cleared first: 'new' for every key (a stale 'old' would be served within staleTtl).
    for (const worker of group)
      expect(await worker.request({ op: 'load', namespace: OWN, keys, value: 'new' })).toEqual(keys.map(() => 'new'))
    expect(await loadsPerKey(OWN)).toEqual(keys.map(() => 2))
  })

  it('a hard clear never brings back a fail-safe copy of an own key, in any process', async () => {
    const group = await spawn(3, { clearable: true, ttl: 100, staleIfError: '1h' })
    for (const worker of group) await worker.request({ op: 'load', namespace: OWN, keys: ['k', 'control'], value: 'v' })
    await sleep(150) // past the ttl: only fail-safe copies are left, in Redis and in each L1
    // Before the clear the failing loader is covered by the fail-safe copy (the test can fail).
    for (const worker of group)
      expect(await worker.request({ op: 'fail', namespace: OWN, key: 'control' })).toEqual({ value: 'v' })
    await group[1]!.request({ op: 'clear' })
    await allTold([group[0]!, group[2]!], 1)
    for (const worker of group)
      expect(await worker.request({ op: 'fail', namespace: OWN, key: 'k' })).toEqual({ error: 'database down' })
  })

  it('without the option, clear() leaves the own keys in every process (loads counted)', async () => {
    const group = await spawn(2, {})
    for (const worker of group) await worker.request({ op: 'load', namespace: OWN, keys, value: 'old' })
    await group[0]!.request({ op: 'clear' })
    // (A cache that has used no namespace is not subscribed to the bumps: nothing of it to drop.)
    for (const worker of group)
      expect(await worker.request({ op: 'load', namespace: OWN, keys, value: 'new' })).toEqual(keys.map(() => 'old'))
    expect(await loadsPerKey(OWN)).toEqual(keys.map(() => 1))
  })
})
