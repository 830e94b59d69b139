import { describe, expect, it } from 'vitest'
import { redisAvailable } from '../support/redis.js'
import type { Worker } from '../support/workers.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/cache-worker.ts', import.meta.url)

interface CallResult {
  ok: boolean
  value?: { key: string; value: string; by: number }
  error?: string
}

describe.skipIf(!redisAvailable)('across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const redis = suite.redis

  function spawn(count: number, cacheOptions: object = {}): Promise<Worker[]> {
    return suite.spawn(count, { CACHE_OPTIONS: JSON.stringify(cacheOptions) })
  }

  async function loads(key: string): Promise<number> {
    return Number((await redis().get(`loads:${key}`)) ?? 0)
  }

  async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (!(await condition())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }

  it('cold stampede: 4 processes × 50 concurrent calls run the loader exactly once', async () => {
    const group = await spawn(4)
    const results = await Promise.all(
      group.map((w) => w.request<CallResult[]>({ op: 'burst', keys: ['cold'], calls: 50, loaderMs: 200 })),
    )
    const all = results.flat()
    expect(all).toHaveLength(200)
    expect(all.every((r) => r.ok)).toBe(true)
    expect(await loads('cold')).toBe(1)
    const distinct = new Set(all.map((r) => JSON.stringify(r.value)))
    expect(distinct.size).toBe(1)
  })

  it('many keys: 4 processes × 500 calls over 50 cold keys run each loader exactly once', async () => {
    const group = await spawn(4)
    const keys = Array.from({ length: 50 }, (_, i) => `many-${i}`)
    const results = await Promise.all(
      group.map((w) => w.request<CallResult[]>({ op: 'burst', keys, calls: 500, loaderMs: 50 })),
    )
    expect(results.flat().every((r) => r.ok)).toBe(true)
    const counts = await Promise.all(keys.map(loads))
    expect(counts).toEqual(keys.map(() => 1))
  })

  it('leader crash: a SIGKILLed leader is replaced after about one lease and every survivor gets a value', async () => {
    const lease = 1_000
    const [leader] = await spawn(1, { lock: { lease } })
    const pending = leader!
      .request<CallResult[]>({ op: 'burst', keys: ['crash'], calls: 5, loaderMs: 60_000 })
      .catch(() => 'killed')
    await until(async () => (await loads('crash')) === 1, 'the first leader to start loading')
    const survivors = await spawn(3, { lock: { lease } })
    const waiting = Promise.all(
      survivors.map((w) => w.request<CallResult[]>({ op: 'burst', keys: ['crash'], calls: 20, loaderMs: 100 })),
    )
    // They queue behind the lock: each survivor process is subscribed to the key's channel.
    await until(
      async () => ((await redis().pubsub('NUMSUB', 'sg:{k:crash}:ch')) as [string, number])[1] === 3,
      'the survivors to queue behind the lock',
    )
    const killedAt = Date.now()
    leader!.kill('SIGKILL')
    expect(await pending).toBe('killed')
    const results = (await waiting).flat()
    const recoveredMs = Date.now() - killedAt
    expect(results.every((r) => r.ok)).toBe(true)
    expect(new Set(results.map((r) => r.value?.by)).size).toBe(1) // one new leader served them all
    expect(await loads('crash')).toBe(2)
    // About one lease (1 s) plus the new load; a generous bound that still rules out "never".
    expect(recoveredMs).toBeLessThan(lease * 8)
  })

  it("fencing: a leader that stalls past its lease cannot overwrite the next leader's value", async () => {
    const lease = 300
    const [stalled, next] = await spawn(2, { lock: { lease } })
    const late = stalled!.request<CallResult[]>({
      op: 'burst',
      keys: ['fenced'],
      calls: 1,
      loaderMs: 0,
      busyMs: 2_000,
      value: 'old',
    })
    await until(async () => (await loads('fenced')) === 1, 'the stalled leader to start')
    await until(async () => (await redis().exists('sg:{k:fenced}:lock')) === 0, 'the stalled lease to expire')
    const fresh = await next!.request<CallResult[]>({
      op: 'burst',
      keys: ['fenced'],
      calls: 1,
      loaderMs: 0,
      value: 'new',
    })
    expect(fresh[0]?.value?.value).toBe('new')
    const stale = await late
    expect(stale[0]?.value?.value).toBe('old') // its own callers still get what they loaded
    expect(JSON.parse((await redis().hget('sg:{k:fenced}', 'd'))!).value).toBe('new')
    const stats = await stalled!.request<Record<string, number>>({ op: 'stats' })
    expect(stats.fenced).toBe(1)
  })

  it('lost notification: waiters finish by polling when the subscriber connection is killed', async () => {
    const [leader, ...waiters] = await spawn(3, { lock: { pollInterval: 50, maxPollInterval: 300 } })
    const led = leader!.request<CallResult[]>({ op: 'burst', keys: ['lost'], calls: 1, loaderMs: 1_500 })
    await until(async () => (await loads('lost')) === 1, 'the leader to start')
    const waiting = Promise.all(
      waiters.map((w) => w.request<CallResult[]>({ op: 'burst', keys: ['lost'], calls: 10, loaderMs: 0 })),
    )
    await until(
      async () => ((await redis().pubsub('NUMSUB', 'sg:{k:lost}:ch')) as [string, number])[1] === 2,
      'both waiters to subscribe',
    )
    const killed = (await redis().call('CLIENT', 'KILL', 'TYPE', 'pubsub')) as number
    expect(killed).toBeGreaterThanOrEqual(2)
    const results = [...(await led), ...(await waiting).flat()]
    expect(results).toHaveLength(21)
    expect(results.every((r) => r.ok && r.value?.value === 'value-of-lost')).toBe(true)
    expect(await loads('lost')).toBe(1)
  })
})
