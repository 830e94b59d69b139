import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createCache, type CacheEvents } from '../../src/index.js'
import { startBlackholeProxy, type BlackholeProxy } from '../support/blackhole-proxy.js'
import { HOST, redisAvailable } from '../support/redis.js'
import { until } from '../support/timing.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/cache-api-worker.ts', import.meta.url)

interface Loaded {
  value: string
  by: number
}
type Peeked = { value: Loaded | undefined; has: boolean }

describe.skipIf(!redisAvailable)('durable deletes across processes, through a real partition', () => {
  const suite = useWorkerSuite(WORKER)
  let proxy: BlackholeProxy | undefined

  afterEach(async () => {
    await proxy?.close()
    proxy = undefined
  })

  const loads = async (key: string) => Number((await suite.redis().get(`loads:${key}`)) ?? 0)
  const serverMs = async () => {
    const [seconds, micros] = await suite.redis().time()
    return Number(seconds) * 1000 + Number(micros) / 1000
  }
  const keys = Array.from({ length: 10 }, (_, i) => `k${i}`)

  it('10 deletes queued while cut off; healed, another process sees each gone, a value written meanwhile kept, a load begun before fenced out', async () => {
    // The process under test: its cache reaches Redis only through the proxy.
    proxy = await startBlackholeProxy(suite.server().port)
    const client = new Redis({ host: HOST, port: proxy.port })
    client.on('error', () => {})
    const cut = createCache({
      redis: client,
      ttl: '30s',
      redisTimeout: 200,
      durableDeletes: { default: 'queue', retryInterval: '100ms' },
    })
    await cut.ready()
    const replayed: CacheEvents['delete-replayed'][] = []
    cut.on('delete-replayed', (event) => replayed.push(event))

    // Another process loads every key (each into its L1), and starts a slow reload of k7 that holds its lock.
    const [other] = await suite.spawn(1)
    for (const key of keys) await other!.request({ op: 'load', key, value: 'old' })
    const slowReload = other!.request<{ value: Loaded }[]>({
      op: 'force',
      key: 'k7',
      value: 'loaded-before-the-delete',
      calls: 1,
      releaseKey: 'go:k7',
    })
    slowReload.catch(() => {}) // awaited below; a failure before that must not go unhandled
    await until(async () => (await loads('k7')) === 2, 'the slow reload of k7 to start', 10_000)

    proxy.blackhole()
    for (const key of keys) expect(await cut.delete(key)).toBe('queued')
    expect(cut.stats()['delete-queued']).toBe(10)
    // The fence is this process's estimate of the server clock (docs/durable-deletes.md): 'after'
    // means later than the estimate's error. That is a few ms on a quiet machine, but the
    // estimate's round trip can take tens of ms on a loaded one (with 20 ms here, a CI run erased
    // k5): 1 s is past any such error.
    const deletedAt = await serverMs()
    await until(async () => (await serverMs()) > deletedAt + 1_000, 'the server clock to pass the fence margin', 5_000)
    // Written after the deletes were asked for, while the deleting process is cut off: must survive the replay.
    await other!.request({ op: 'force', key: 'k5', value: 'newer', calls: 1 })

    proxy.heal()
    await until(() => replayed.length === 10, 'the ten deletes to be replayed', 15_000)
    expect(replayed.map((event) => event.key)).toEqual(keys) // in the order they were asked for
    expect(replayed.filter((event) => !event.erased).map((event) => event.key)).toEqual(['k5'])

    await suite.redis().set('go:k7', '1') // the reload begun before the delete now tries to commit
    const [reload] = await slowReload
    expect(reload!.value.value).toBe('loaded-before-the-delete') // its own caller gets it

    // A process that never saw any of it reads Redis: every deleted key gone, k5's newer value there.
    const [fresh] = await suite.spawn(1)
    for (const key of keys) {
      const peeked = await fresh!.request<Peeked>({ op: 'peek', key })
      if (key === 'k5') expect(peeked.value?.value).toBe('newer')
      else expect(peeked, key).toEqual({ value: undefined, has: false })
    }
    // The other process dropped its L1 copies on the replay's broadcasts (it reads Redis again).
    await until(
      async () => (await other!.request<Peeked>({ op: 'peek', key: 'k0' })).has === false,
      "the other process's L1 to drop k0",
      5_000,
    )
    for (const key of keys.filter((key) => key !== 'k5'))
      expect(await other!.request<Peeked>({ op: 'peek', key }), key).toEqual({ value: undefined, has: false })
    expect(cut.stats()['delete-dropped']).toBe(0)
    await cut.close()
    client.disconnect()
  })
})
