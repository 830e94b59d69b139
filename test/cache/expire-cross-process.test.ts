import { describe, expect, it } from 'vitest'
import { redisAvailable } from '../support/redis.js'
import { until } from '../support/timing.js'
import type { Worker } from '../support/workers.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/batch-worker.ts', import.meta.url)

interface Produced {
  value: string
  by: number
}

type Results = { value: Produced; outcome: string }[]

describe.skipIf(!redisAvailable)('expire across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const loads = async (key: string) => Number((await suite.redis().get(`loads:${key}`)) ?? 0)
  const spawn = (count: number, options: object) => suite.spawn(count, { CACHE_OPTIONS: JSON.stringify(options) })

  /** Every worker has `key` fresh in its L1 (a peek answers from L1 without loading). */
  async function warm(group: Worker[], key: string): Promise<void> {
    await group[0]!.request({ op: 'load', key, value: 'old' })
    for (const worker of group) expect(await worker.request({ op: 'peek', key })).toMatchObject({ has: true })
  }

  /** Until no worker has a fresh `key`: the broadcast reached each and its L1 copy is gone. */
  async function dropped(group: Worker[], key: string): Promise<void> {
    for (const worker of group)
      await until(
        async () => !(await worker.request<{ has: boolean }>({ op: 'peek', key })).has,
        'every process to drop its fresh copy',
        5_000,
      )
  }

  it('4 processes × 20 callers after expire: ONE reload in all, all 80 callers served the old value stale', async () => {
    const group = await spawn(4, { staleTtl: '1m' })
    await warm(group, 'hot')
    expect(await loads('hot')).toBe(1)
    expect(await group[1]!.request({ op: 'expire', key: 'hot' })).toBe(true)
    await dropped(group, 'hot')
    const answers = await Promise.all(
      group.map((worker) =>
        worker.request<Results>({ op: 'load', key: 'hot', value: 'new', calls: 20, releaseKey: 'go:hot' }),
      ),
    )
    const results = answers.flat()
    expect(results).toHaveLength(80)
    expect(results.filter((r) => r.outcome === 'stale' && r.value.value === 'old')).toHaveLength(80)
    await until(async () => (await loads('hot')) === 2, 'the one reload to start', 10_000)
    await suite.redis().set('go:hot', '1')
    for (const worker of group)
      await until(
        async () => (await worker.request<{ value?: Produced }>({ op: 'peek', key: 'hot' })).value?.value === 'new',
        'every process to see the reloaded value',
        10_000,
      )
    expect(await loads('hot')).toBe(2) // the first load and ONE reload, across four processes
  })

  it('a delete racing the reload an expire started: the reload is fenced out, no process sees its value', async () => {
    const group = await spawn(3, { staleTtl: '1m' })
    await warm(group, 'k')
    await group[0]!.request({ op: 'expire', key: 'k' })
    await dropped(group, 'k')
    const [served] = await group[1]!.request<Results>({
      op: 'load',
      key: 'k',
      value: 'reloaded',
      releaseKey: 'go:k',
    })
    expect(served).toMatchObject({ outcome: 'stale', value: { value: 'old' } })
    await until(async () => (await loads('k')) === 2, 'the reload to start', 10_000)
    await group[2]!.request({ op: 'delete', key: 'k' })
    await suite.redis().set('go:k', '1')
    await until(
      async () => (await group[1]!.request<{ fenced?: number }>({ op: 'stats' })).fenced === 1,
      'the reload to be fenced out',
      10_000,
    )
    expect(await suite.redis().hget('sg:{k:k}', 'd')).toBeNull()
    for (const worker of group) expect(await worker.request({ op: 'peek', key: 'k' })).toMatchObject({ has: false })
    const [next] = await group[2]!.request<Results>({ op: 'load', key: 'k', value: 'after' })
    expect(next).toMatchObject({ outcome: 'loaded', value: { value: 'after' } })
    expect(await loads('k')).toBe(3)
  })

  it('without staleTtl: after expire, 3 processes × 10 callers get the new value from ONE load, none the old one', async () => {
    const group = await spawn(3, { staleTtl: 0 })
    await warm(group, 'k')
    expect(await group[0]!.request({ op: 'expire', key: 'k' })).toBe(true)
    await dropped(group, 'k')
    const results = (
      await Promise.all(group.map((w) => w.request<Results>({ op: 'load', key: 'k', value: 'new', calls: 10 })))
    ).flat()
    expect(results).toHaveLength(30)
    expect(results.every((r) => r.value.value === 'new')).toBe(true)
    expect(await loads('k')).toBe(2)
  })

  it('expire of a key nobody stored: false, no process loads, nothing written', async () => {
    const group = await spawn(2, { staleTtl: '1m' })
    expect(await group[0]!.request({ op: 'expire', key: 'none' })).toBe(false)
    expect(await suite.redis().exists('sg:{k:none}', 'sg:{k:none}:v')).toBe(0)
    expect(await loads('none')).toBe(0)
  })

  it('expireByTag from one process: 3 processes × getOrLoadMany of the 10 tagged keys get them stale, and each key is reloaded once', async () => {
    const group = await spawn(3, { staleTtl: '1m' })
    const keys = Array.from({ length: 10 }, (_, i) => `t${i}`)
    await group[0]!.request({ op: 'many', keys, value: 'old', tags: ['catalog'] })
    for (const worker of group) await worker.request({ op: 'many', keys, value: 'unused' }) // every L1 holds them
    expect(await group[2]!.request({ op: 'expireByTag', tag: 'catalog' })).toBe(10)
    for (const key of keys) await dropped(group, key)
    const answers = await Promise.all(
      group.map((worker) =>
        worker.request<{ batches: string[][]; results: Produced[] }>({
          op: 'many',
          keys,
          value: 'new',
          releaseKey: 'go:catalog',
        }),
      ),
    )
    for (const { results } of answers) expect(results.map((r) => r.value)).toEqual(keys.map((key) => `old:${key}`))
    await until(
      async () => (await Promise.all(keys.map(loads))).every((n) => n === 2),
      'each key to be reloaded once',
      10_000,
    )
    await suite.redis().set('go:catalog', '1')
    await until(
      async () => (await group[1]!.request<{ value?: Produced }>({ op: 'peek', key: 't9' })).value?.value === 'new:t9',
      'the reloads to land',
      10_000,
    )
    expect(await Promise.all(keys.map(loads))).toEqual(keys.map(() => 2))
  })
})
