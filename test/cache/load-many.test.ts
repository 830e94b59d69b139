import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { BatchResultError, createCache, type ManyResult } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { countScripts } from '../support/script-calls.js'
import { redisAvailable } from '../support/redis.js'
import { until } from '../support/timing.js'

const valuesOf = <V>(results: Map<string, ManyResult<V>>) =>
  [...results.values()].map((r) => (r.status === 'fulfilled' ? r.value : `error:${(r.reason as Error).name}`))

/** Counts the commands `client` sends, by name (script calls too, as evalsha/eval). */
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

function invalidArgument(argument: string) {
  return expect.objectContaining({ name: 'InvalidArgumentError', argument })
}

describe.skipIf(!redisAvailable)('getOrLoadMany', () => {
  const { cache, client, server, admin } = useCacheSuite()

  it('one batch-loader call with only the missing keys; results in the order given; a second cache loads nothing', async () => {
    const calls: string[][] = []
    const loader = (keys: string[]) => {
      calls.push(keys)
      return new Map(keys.map((key) => [key, `v:${key}`]))
    }
    const first = cache()
    await first.set('b', 'cached-b')
    const results = await first.getOrLoadMany(['a', 'b', 'c'], loader)
    expect([...results.keys()]).toEqual(['a', 'b', 'c'])
    expect(valuesOf(results)).toEqual(['v:a', 'cached-b', 'v:c'])
    expect(calls).toEqual([['a', 'c']])
    const again = await cache().getOrLoadMany(['c', 'a', 'b'], loader)
    expect(valuesOf(again)).toEqual(['v:c', 'v:a', 'cached-b'])
    expect(calls).toHaveLength(1)
  })

  it('an array result is read in the order of the keys the loader got; keys with braces and non-ASCII work', async () => {
    const keys = ['x', 'a{b}', 'ü:€']
    const results = await cache().getOrLoadMany(keys, (got) => got.map((key) => key.toUpperCase()))
    expect(valuesOf(results)).toEqual(['X', 'A{B}', 'Ü:€'])
    const again = await cache().getOrLoadMany(keys, () => {
      throw new Error('cached: not called')
    })
    expect(valuesOf(again)).toEqual(['X', 'A{B}', 'Ü:€'])
  })

  it('1,000 keys, 900 in Redis: one MGET, one get-or-lock-many script, one batch of exactly the 100 others', async () => {
    const keys = Array.from({ length: 1000 }, (_, i) => `k${i}`)
    const writer = cache()
    await writer.getOrLoadMany(
      keys.filter((_, i) => i % 10 !== 0),
      (got) => got.map((key) => `old:${key}`),
    )
    const connection = client()
    const reader = cache({ redis: connection })
    await reader.ready()
    const scripts = countScripts(connection)
    const sent = countCommands(connection)
    const batches: string[][] = []
    const results = await reader.getOrLoadMany(keys, (got) => {
      batches.push(got)
      return got.map((key) => `new:${key}`)
    })
    expect(batches).toHaveLength(1)
    expect(batches[0]).toEqual(keys.filter((_, i) => i % 10 === 0))
    expect(valuesOf(results)).toEqual(keys.map((key, i) => (i % 10 === 0 ? `new:${key}` : `old:${key}`)))
    expect(sent.mget).toBe(1)
    expect(sent.get ?? 0).toBe(0)
    expect(scripts['get-or-lock-many.lua']).toEqual({ calls: 1, keys: 300 }) // 3 names per key
    expect(scripts['get-or-lock.lua']).toBeUndefined()
    expect(scripts['commit.lua']?.calls).toBe(100)
  })

  it('450 misses, more than one script takes (200): 3 get-or-lock-many calls, still ONE batch-loader call', async () => {
    const keys = Array.from({ length: 450 }, (_, i) => `m${i}`)
    const connection = client()
    const c = cache({ redis: connection })
    await c.ready()
    const scripts = countScripts(connection)
    const batches: string[][] = []
    const results = await c.getOrLoadMany(keys, (got) => {
      batches.push(got)
      return got
    })
    expect(valuesOf(results)).toEqual(keys)
    expect(batches).toEqual([keys])
    expect(scripts['get-or-lock-many.lua']).toEqual({ calls: 3, keys: 3 * 450 })
  })

  it('with loaderConcurrency (limit 2): no deadlock, every key loaded once, in batches split by the permits', async () => {
    const c = cache({ loaderConcurrency: { limit: 2 } })
    const keys = Array.from({ length: 10 }, (_, i) => `lc${i}`)
    const batches: string[][] = []
    const results = await c.getOrLoadMany(keys, async (got) => {
      batches.push(got)
      return got
    })
    expect(valuesOf(results)).toEqual(keys)
    expect(batches.flat().sort()).toEqual([...keys].sort())
  })

  it('a key missing from the Map, an Error as a value, and a throwing loader fail those keys only', async () => {
    const c = cache()
    await c.set('ok', 'cached')
    const results = await c.getOrLoadMany(['ok', 'gone', 'bad', 'fine'], (keys) => {
      expect(keys).toEqual(['gone', 'bad', 'fine'])
      return new Map<string, string | Error>([
        ['bad', new TypeError('no such row')],
        ['fine', 'loaded'],
      ])
    })
    expect(results.get('ok')).toEqual({ status: 'fulfilled', value: 'cached' })
    expect(results.get('fine')).toEqual({ status: 'fulfilled', value: 'loaded' })
    const gone = results.get('gone')!
    expect(gone.status === 'rejected' && gone.reason).toBeInstanceOf(BatchResultError)
    expect(gone.status === 'rejected' && gone.reason).toMatchObject({ key: 'gone', reason: 'missing' })
    const bad = results.get('bad')!
    expect(bad.status === 'rejected' && bad.reason).toBeInstanceOf(TypeError)
    // Failures are not cached: the next call loads them again (and only them).
    const thrown = await c.getOrLoadMany(['ok', 'fine', 'gone'], () => {
      throw new RangeError('database down')
    })
    expect(valuesOf(thrown)).toEqual(['cached', 'loaded', 'error:RangeError'])
  })

  it('a result of the wrong shape fails every key it was for (BatchResultError, malformed)', async () => {
    const results = await cache().getOrLoadMany(['p', 'q'], () => ['only one'])
    for (const result of results.values())
      expect(result.status === 'rejected' && result.reason).toMatchObject({ reason: 'malformed' })
  })

  it('bad input rejects the whole call, before any command or load', async () => {
    const c = cache()
    let loads = 0
    const loader = (keys: string[]) => {
      loads++
      return keys
    }
    await expect(c.getOrLoadMany([], loader)).rejects.toThrow(invalidArgument('keys'))
    await expect(c.getOrLoadMany('abc' as unknown as string[], loader)).rejects.toThrow(invalidArgument('keys'))
    await expect(c.getOrLoadMany(['a', 'b', 'a'], loader)).rejects.toThrow(invalidArgument('keys[2]'))
    await expect(c.getOrLoadMany(['a', ''], loader)).rejects.toThrow(invalidArgument('keys[1]'))
    await expect(c.getOrLoadMany(['a', 7 as unknown as string], loader)).rejects.toThrow(invalidArgument('keys[1]'))
    await expect(c.getOrLoadMany(['z\uD800'], loader)).rejects.toThrow(invalidArgument('keys[0]'))
    await expect(c.getOrLoadMany(['a'], 'nope' as unknown as typeof loader)).rejects.toThrow(
      invalidArgument('batchLoader'),
    )
    await expect(c.getOrLoadMany(['a'], loader, { ttl: 'soon' })).rejects.toThrow(invalidArgument('ttl'))
    await expect(c.getOrLoadMany(['a'], loader, { forceRefresh: true })).rejects.toThrow(
      invalidArgument('forceRefresh'),
    )
    const tooMany = Array.from({ length: 10_001 }, (_, i) => `k${i}`)
    await expect(c.getOrLoadMany(tooMany, loader)).rejects.toThrow(invalidArgument('keys'))
    expect(loads).toBe(0)
    await c.close()
    await expect(c.getOrLoadMany(['a'], loader)).rejects.toMatchObject({ name: 'CacheClosedError' })
  })

  it('a key this process is loading already joins that load; a concurrent getOrLoad of a batched key joins the batch', async () => {
    const c = cache()
    let release: (() => void) | undefined
    const slow = c.getOrLoad('busy', () => new Promise<string>((resolve) => (release = () => resolve('single'))))
    const batches: string[][] = []
    const many = c.getOrLoadMany(['busy', 'other'], (keys) => {
      batches.push(keys)
      return keys.map((key) => `batch:${key}`)
    })
    const joined = c.getOrLoad('other', () => 'own loader')
    await until(() => release !== undefined && batches.length === 1, "busy's load and the batch to start")
    release!()
    expect(valuesOf(await many)).toEqual(['single', 'batch:other'])
    expect(await slow).toBe('single')
    expect(await joined).toBe('batch:other')
    expect(batches).toEqual([['other']])
  })

  it('options apply to every key (ttl, tags)', async () => {
    const c = cache()
    await c.getOrLoadMany(['t1', 't2'], (keys) => keys, { ttl: '5s', tags: ['group'] })
    const pttl = await admin().pttl('sg:{k:t1}:v')
    expect(pttl).toBeGreaterThan(0)
    expect(pttl).toBeLessThanOrEqual(5000)
    await c.deleteByTag('group')
    let loads = 0
    await c.getOrLoadMany(['t1', 't2'], (keys) => {
      loads += keys.length
      return keys
    })
    expect(loads).toBe(2)
  })

  it('Redis down: every key not in L1 is loaded here, in ONE batch-loader call, and the call resolves', async () => {
    const c = cache()
    await c.getOrLoadMany(['warm'], (keys) => keys.map(() => 'in L1'))
    await server().kill()
    try {
      const batches: string[][] = []
      const results = await c.getOrLoadMany(['warm', 'a', 'b', 'c'], (keys) => {
        batches.push(keys)
        return keys.map((key) => `local:${key}`)
      })
      expect(valuesOf(results)).toEqual(['in L1', 'local:a', 'local:b', 'local:c'])
      expect(batches).toEqual([['a', 'b', 'c']])
    } finally {
      await server().restart()
    }
  })

  it('the batch script sent and not answered (writes paused past redisTimeout): keys loaded here, and the locks it takes later are released behind it', async () => {
    const c = cache({ redisTimeout: 300, lock: { lease: '30s' } })
    await c.ready()
    await admin().call('CLIENT', 'PAUSE', '1500', 'WRITE') // MGET answers, the script waits
    const batches: string[][] = []
    const results = await c.getOrLoadMany(['p1', 'p2'], (keys) => {
      batches.push(keys)
      return keys
    })
    expect(valuesOf(results)).toEqual(['p1', 'p2'])
    expect(batches).toEqual([['p1', 'p2']])
    // Once the pause ends, the script runs and takes both locks (its token counter creates the hashes);
    // the releases queued behind it free them, else they would be held for the 30 s lease.
    await until(async () => (await admin().exists('sg:{k:p1}', 'sg:{k:p2}')) === 2, 'the script to run', 5_000)
    await until(
      async () => (await admin().exists('sg:{k:p1}:lock', 'sg:{k:p2}:lock')) === 0,
      'the locks to be released',
      5_000,
    )
  })

  it('keys in grace (expired): served stale at once, and reloaded in the background in ONE batch-loader call', async () => {
    const c = cache({ staleTtl: '1m' })
    const keys = Array.from({ length: 20 }, (_, i) => `g${i}`)
    await c.getOrLoadMany(keys, (got) => got.map((key) => `old:${key}`), { tags: ['grace'] })
    expect(await c.expireByTag('grace')).toBe(20)
    const batches: string[][] = []
    const results = await c.getOrLoadMany(keys, (got) => {
      batches.push(got)
      return got.map((key) => `new:${key}`)
    })
    expect(valuesOf(results)).toEqual(keys.map((key) => `old:${key}`))
    await until(async () => (await c.get(keys[19]!)) === `new:${keys[19]}`, 'the background reload')
    expect(batches).toEqual([keys])
  })
})

describe('getOrLoadMany without Redis', () => {
  it('L1 and one batch-loader call', async () => {
    const c = createCache({ ttl: '1m' })
    const batches: string[][] = []
    const load = (keys: string[]) => {
      batches.push(keys)
      return keys.map((key) => key.length)
    }
    expect(valuesOf(await c.getOrLoadMany(['a', 'bb'], load))).toEqual([1, 2])
    expect(valuesOf(await c.getOrLoadMany(['a', 'bb', 'ccc'], load))).toEqual([1, 2, 3])
    expect(batches).toEqual([['a', 'bb'], ['ccc']])
    await c.close()
  })
})
