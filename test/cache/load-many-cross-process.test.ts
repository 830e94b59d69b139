import type { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { countScripts } from '../support/script-calls.js'
import { until } from '../support/timing.js'
import { useWorkerSuite } from '../support/worker-suite.js'

const WORKER = new URL('../fixtures/batch-worker.ts', import.meta.url)

interface Produced {
  value: string
  by: number
}

/** Counts the commands `client` sends, by name. */
function countCommands(client: Redis): Record<string, number> {
  const counts: Record<string, number> = {}
  const send = client.sendCommand.bind(client)
  client.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
    const name = command.name.toLowerCase()
    counts[name] = (counts[name] ?? 0) + 1
    return (send as (...a: unknown[]) => unknown)(command, ...rest)
  }) as typeof client.sendCommand
  return counts
}

describe.skipIf(!redisAvailable)('getOrLoadMany and batcher across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const caches: Cache[] = []
  afterEach(async () => {
    await Promise.all(caches.splice(0).map((cache) => cache.close()))
  })

  function cache(connection = suite.server().client()): Cache {
    const created = createCache({ redis: connection, ttl: '30s' })
    caches.push(created)
    return created
  }

  const loadsOf = async (keys: string[]) =>
    keys.length === 0 ? [] : (await suite.redis().mget(...keys.map((key) => `loads:${key}`))).map(Number)

  it('1,000 keys: 900 cached, 50 being loaded by another process: the batch loader gets exactly the other 50, in one call', async () => {
    const keys = Array.from({ length: 1000 }, (_, i) => `k${i}`)
    const held = keys.filter((_, i) => i % 20 === 0)
    const missing = keys.filter((_, i) => i % 20 === 1)
    const cached = keys.filter((_, i) => i % 20 > 1)
    expect([held.length, missing.length, cached.length]).toEqual([50, 50, 900])
    await cache().getOrLoadMany(cached, (got) => got.map((key) => ({ value: `seeded:${key}`, by: 0 })))

    const [other] = await suite.spawn(1)
    const holding = other!.request<{ batches: string[][]; results: Produced[] }>({
      op: 'many',
      keys: held,
      value: 'other',
      releaseKey: 'go',
    })
    const locks = held.map((key) => `sg:{k:${key}}:lock`)
    await until(async () => (await suite.redis().exists(...locks)) === 50, 'the other process to hold 50 locks', 15_000)

    const connection = suite.server().client()
    const counted = cache(connection)
    await counted.ready()
    const scripts = countScripts(connection)
    const commands = countCommands(connection)
    const batches: string[][] = []
    const results = await counted.getOrLoadMany(keys, async (got) => {
      batches.push(got)
      await suite.redis().set('go', '1') // the other process's loads finish only now: ours saw their locks held
      return got.map((key) => ({ value: `mine:${key}`, by: process.pid }))
    })

    expect(batches).toEqual([missing])
    const elsewhere = await holding
    expect(elsewhere.batches).toEqual([held])
    const value = (key: string) => {
      const result = results.get(key)!
      return result.status === 'fulfilled' ? (result.value as Produced) : result.reason
    }
    for (const key of cached) expect(value(key)).toEqual({ value: `seeded:${key}`, by: 0 })
    for (const key of missing) expect(value(key)).toEqual({ value: `mine:${key}`, by: process.pid })
    for (const key of held) expect(value(key)).toEqual({ value: `other:${key}`, by: other!.pid })
    // Loads counted across processes: each held key once (by the other process), no cached key at all.
    expect(await loadsOf(held)).toEqual(held.map(() => 1))
    expect((await loadsOf(cached)).every((n) => n === 0)).toBe(true)
    // The batch's Redis work: one MGET for 1,000 keys, one get-or-lock-many.lua call for the 100
    // not fresh (3 names each); then each of the 50 waits subscribes and re-checks on its own
    // (get-or-lock.lua), as getOrLoad's wait does, and the 50 loads commit.
    expect(commands.mget).toBe(1)
    expect(commands.get ?? 0).toBe(0)
    expect(scripts['get-or-lock-many.lua']).toEqual({ calls: 1, keys: 300 })
    expect(scripts['get-or-lock.lua']?.calls).toBeGreaterThanOrEqual(50)
    expect(scripts['commit.lua']?.calls).toBe(50)
  })

  it('4 processes × a batcher loading the same 30 keys in one tick: each key loaded once in all, each process calls its batch loader at most once', async () => {
    const group = await suite.spawn(4)
    const keys = Array.from({ length: 30 }, (_, i) => `b${i}`)
    const answers = await Promise.all(
      group.map((worker, i) =>
        worker.request<{ batches: string[][]; values: Produced[] }>({ op: 'batcher', keys, value: `w${i}` }),
      ),
    )
    expect(await loadsOf(keys)).toEqual(keys.map(() => 1))
    for (const { batches } of answers) expect(batches.length).toBeLessThanOrEqual(1)
    expect(answers.flatMap(({ batches }) => batches.flat()).sort()).toEqual([...keys].sort())
    // Every process got, for each key, the one value that was loaded for it.
    for (let k = 0; k < keys.length; k++) {
      const seen = new Set(answers.map(({ values }) => JSON.stringify(values[k])))
      expect(seen.size).toBe(1)
    }
  })
})
