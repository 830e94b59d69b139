import { describe, expect, it } from 'vitest'
import { commandsSinceReset } from '../support/command-stats.js'
import { redisAvailable } from '../support/redis.js'
import { sleep, until } from '../support/timing.js'
import type { Worker } from '../support/workers.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/namespace-worker.ts', import.meta.url)

describe.skipIf(!redisAvailable)('namespaces across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const keys = Array.from({ length: 10 }, (_, i) => `u${i}`)

  function spawn(count: number, cacheOptions: object = {}): Promise<Worker[]> {
    return suite.spawn(count, { CACHE_OPTIONS: JSON.stringify(cacheOptions) })
  }

  async function loads(namespace: string): Promise<number> {
    const counted = await suite.redis().keys(`loads:${namespace}:*`)
    const values = counted.length === 0 ? [] : await suite.redis().mget(...counted)
    return values.reduce((sum, value) => sum + Number(value), 0)
  }

  async function allTold(workers: Worker[], times: number): Promise<void> {
    await until(
      async () =>
        (await Promise.all(workers.map((w) => w.request<number>({ op: 'cleared' })))).every((n) => n === times),
      'every other process to hear of the clear',
      10_000,
    )
  }

  it('3 processes: one clear() is one script; every process then reloads the namespace once in all, other namespaces untouched', async () => {
    const group = await spawn(3)
    for (const worker of group) {
      expect(await worker.request({ op: 'load', namespace: 'users', keys, value: 'old' })).toEqual(
        keys.map(() => 'old'),
      )
      await worker.request({ op: 'load', namespace: 'orders', keys, value: 'order' })
    }
    expect([await loads('users'), await loads('orders')]).toEqual([10, 10]) // one load per key across 3 processes
    await suite.redis().config('RESETSTAT')
    await group[0]!.request({ op: 'clear', namespace: 'users' })
    // One script (INFO also counts the commands it runs: TIME, TYPE, GET, SET, PUBLISH), whatever the namespace holds.
    const sent = await commandsSinceReset(suite.redis())
    expect((sent.eval ?? 0) + (sent.evalsha ?? 0)).toBe(1)
    expect(Object.keys(sent).sort()).toEqual(
      [sent.eval ? 'eval' : 'evalsha', 'get', 'publish', 'set', 'time', 'type'].sort(),
    )
    await allTold(group.slice(1), 1)
    for (const worker of group)
      expect(await worker.request({ op: 'load', namespace: 'users', keys, value: 'new' })).toEqual(
        keys.map(() => 'new'),
      )
    for (const worker of group)
      expect(await worker.request({ op: 'load', namespace: 'orders', keys, value: 'x' })).toEqual(
        keys.map(() => 'order'),
      )
    expect([await loads('users'), await loads('orders')]).toEqual([20, 10])
  })

  it('a hard clear never brings back a fail-safe copy, in the process that cleared nor in those that held one', async () => {
    const group = await spawn(3, { ttl: 100, staleIfError: '1h' })
    for (const worker of group) await worker.request({ op: 'load', namespace: 'users', keys: ['k'], value: 'before' })
    for (const worker of group) await worker.request({ op: 'load', namespace: 'control', keys: ['k'], value: 'kept' })
    await sleep(150) // past the ttl: only fail-safe copies are left, in Redis and in each L1
    // The control namespace, not cleared: the failing loader is covered by the fail-safe copy (the test can fail).
    for (const worker of group)
      expect(await worker.request({ op: 'fail', namespace: 'control', key: 'k' })).toEqual({ value: 'kept' })
    await group[0]!.request({ op: 'clear', namespace: 'users' })
    await allTold(group.slice(1), 1)
    for (const worker of group)
      expect(await worker.request({ op: 'fail', namespace: 'users', key: 'k' })).toEqual({ error: 'database down' })
  })

  it("the cache's clear() empties every namespace in every process", async () => {
    const group = await spawn(2)
    for (const namespace of ['users', 'orders'])
      for (const worker of group) await worker.request({ op: 'load', namespace, keys, value: 'old' })
    await group[1]!.request({ op: 'clear' })
    await allTold(group.slice(0, 1), 1)
    for (const namespace of ['users', 'orders'])
      for (const worker of group) await worker.request({ op: 'load', namespace, keys, value: 'new' })
    expect([await loads('users'), await loads('orders')]).toEqual([20, 20])
  })
})
