import { describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'
import { until } from '../support/timing.js'

function invalidArgument(argument: string) {
  return expect.objectContaining({ name: 'InvalidArgumentError', argument })
}

/** A loader that counts its runs and, if `gate` is given, finishes only once it resolves. */
function counted(value: string, gate?: Promise<void>) {
  const loader = async () => {
    loader.runs++
    await gate
    return value
  }
  loader.runs = 0
  return loader
}

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

describe.skipIf(!redisAvailable)('expire and expireByTag', () => {
  const { cache, admin, server } = useCacheSuite({ staleTtl: '1m' })

  it('the value stays, stale: the next call is served it and starts ONE reload; 20 callers meanwhile get it stale', async () => {
    const c = cache()
    await c.getOrLoad('k', counted('old'))
    expect(await c.expire('k')).toBe(true)
    expect(await admin().exists('sg:{k:k}')).toBe(1) // the hash, with the value
    expect(await admin().exists('sg:{k:k}:v')).toBe(0) // no fresh copy
    expect(await c.get('k')).toBeUndefined() // a peek sees no fresh value
    const reload = gate()
    const loader = counted('new', reload.opened)
    const results = await Promise.all(Array.from({ length: 20 }, () => c.getOrLoadResult('k', loader)))
    expect(results.every((r) => r.value === 'old' && r.outcome === 'stale')).toBe(true)
    await until(() => loader.runs === 1, 'the reload to start')
    reload.open()
    await until(async () => (await c.getOrLoadResult('k', loader)).value === 'new', 'the reload to land')
    expect(loader.runs).toBe(1)
  })

  it('another cache (process) drops its L1 copy and is served the value stale while the first reloads', async () => {
    const [a, b] = [cache(), cache()]
    await a.getOrLoad('k', counted('old'))
    expect(await b.getOrLoad('k', counted('unused'))).toBe('old') // in b's L1 now
    const reload = gate()
    const aLoader = counted('new', reload.opened)
    await a.expire('k')
    expect(await a.getOrLoadResult('k', aLoader)).toEqual({ value: 'old', outcome: 'stale' })
    await until(() => aLoader.runs === 1, 'a to start the reload')
    const bLoader = counted('b')
    const fromB = await Promise.all(Array.from({ length: 10 }, () => b.getOrLoadResult('k', bLoader)))
    expect(fromB.every((r) => r.value === 'old' && r.outcome === 'stale')).toBe(true)
    expect(bLoader.runs).toBe(0)
    reload.open()
    await until(async () => (await b.getOrLoad('k', bLoader)) === 'new', 'b to see the reloaded value')
    expect(bLoader.runs).toBe(0)
  })

  it('a missing, deleted or already stale key: false, and nothing is written (a deleted value never comes back)', async () => {
    const c = cache()
    expect(await c.expire('never')).toBe(false)
    expect(await admin().exists('sg:{k:never}')).toBe(0)
    await c.getOrLoad('gone', counted('v1'))
    await c.delete('gone')
    expect(await c.expire('gone')).toBe(false)
    const reload = counted('v2')
    expect(await c.getOrLoadResult('gone', reload)).toEqual({ value: 'v2', outcome: 'loaded' })
    await c.getOrLoad('twice', counted('v1'))
    expect(await c.expire('twice')).toBe(true)
    expect(await c.expire('twice')).toBe(false) // stale already: its grace is not stretched again
  })

  it('delete after expire while the reload runs: the reload is fenced out, the key stays deleted', async () => {
    const c = cache()
    await c.getOrLoad('k', counted('v1'))
    await c.expire('k')
    const reload = gate()
    const loader = counted('v2', reload.opened)
    expect(await c.getOrLoadResult('k', loader)).toEqual({ value: 'v1', outcome: 'stale' })
    await until(() => loader.runs === 1, 'the reload to start')
    let fenced = 0
    c.on('fenced', () => fenced++)
    await c.delete('k')
    reload.open()
    await until(() => fenced === 1, 'the reload to be fenced out')
    expect(await admin().hget('sg:{k:k}', 'd')).toBeNull()
    const next = counted('v3')
    expect(await c.getOrLoadResult('k', next)).toEqual({ value: 'v3', outcome: 'loaded' })
  })

  it('expire after a newer commit makes that value stale, never an older one', async () => {
    const [a, b] = [cache(), cache()]
    await a.getOrLoad('k', counted('v1'))
    await b.set('k', 'v2')
    await a.expire('k')
    await until(async () => !(await b.has('k')), 'b to drop its L1 copy (the broadcast)')
    const reload = gate()
    expect(await b.getOrLoadResult('k', counted('v3', reload.opened))).toEqual({ value: 'v2', outcome: 'stale' })
    reload.open()
  })

  it('without staleTtl: nobody is served the old value; the next call loads, concurrent callers join that load', async () => {
    const c = cache({ staleTtl: 0 })
    await c.getOrLoad('k', counted('old'))
    expect(await c.expire('k')).toBe(true)
    const loader = counted('new')
    const results = await Promise.all(Array.from({ length: 10 }, () => c.getOrLoadResult('k', loader)))
    expect(results.every((r) => r.value === 'new')).toBe(true)
    expect(results.filter((r) => r.outcome === 'loaded')).toHaveLength(1)
    expect(loader.runs).toBe(1)
  })

  it('expireByTag: every fresh entry of the tag goes stale (count), the others stay fresh', async () => {
    const c = cache()
    for (const key of ['t1', 't2', 't3']) await c.getOrLoad(key, counted(key), { tags: ['group'] })
    await c.getOrLoad('untagged', counted('u'))
    expect(await c.expireByTag('group')).toBe(3)
    for (const key of ['t1', 't2', 't3']) expect(await c.has(key)).toBe(false)
    expect(await c.has('untagged')).toBe(true)
    const loader = counted('new')
    expect(await c.getOrLoadResult('t1', loader)).toEqual({ value: 't1', outcome: 'stale' })
    expect(await c.expireByTag('nothing-here')).toBe(0)
  })

  it('bad input and a closed cache: typed errors, nothing sent', async () => {
    const c = cache()
    await expect(c.expire('')).rejects.toThrow(invalidArgument('key'))
    await expect(c.expire(3 as unknown as string)).rejects.toThrow(invalidArgument('key'))
    await expect(c.expireByTag('')).rejects.toThrow(invalidArgument('tag'))
    await c.close()
    await expect(c.expire('k')).rejects.toMatchObject({ name: 'CacheClosedError' })
    await expect(c.expireByTag('t')).rejects.toMatchObject({ name: 'CacheClosedError' })
  })

  it('Redis down: RedisUnavailableError; once Redis is back, the call works again', async () => {
    const c = cache({ redisTimeout: 300 })
    await c.getOrLoad('k', counted('v1'))
    await server().kill()
    try {
      await expect(c.expire('k')).rejects.toMatchObject({ name: 'RedisUnavailableError' })
      await expect(c.expireByTag('t')).rejects.toMatchObject({ name: 'RedisUnavailableError' })
    } finally {
      await server().restart()
    }
    // The restarted server kept nothing (no persistence): nothing fresh to expire.
    await until(async () => (await c.expire('k').catch(() => undefined)) === false, 'expire to answer again', 10_000)
  })
})

describe('expire without Redis (L1 only)', () => {
  it("makes L1's copy stale: served stale while one reload runs", async () => {
    const c = createCache({ ttl: '1m', staleTtl: '1m' })
    await c.getOrLoad('k', counted('old'), { tags: ['g'] })
    expect(await c.expire('k')).toBe(true)
    const loader = counted('new')
    expect(await c.getOrLoadResult('k', loader)).toEqual({ value: 'old', outcome: 'stale' })
    await until(async () => (await c.getOrLoad('k', loader)) === 'new', 'the reload')
    expect(loader.runs).toBe(1)
    expect(await c.expireByTag('g')).toBe(1) // the key stays indexed under the tag while in L1
    await c.close()
  })
})
