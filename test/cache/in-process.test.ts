import { describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { sleep } from '../support/timing.js'

describe('in-process mode (no Redis)', () => {
  it('runs the loader once for 200 concurrent calls on a cold key', async () => {
    const cache = createCache({ ttl: '10s' })
    let calls = 0
    const loader = async () => {
      calls++
      await sleep(50)
      return { id: 42 }
    }
    const values = await Promise.all(Array.from({ length: 200 }, () => cache.getOrLoad('cold', loader)))
    expect(calls).toBe(1)
    expect(new Set(values).size).toBe(1)
    expect(values[0]).toEqual({ id: 42 })
    await cache.close()
  })

  it('serves later calls from L1 and reports how each value was obtained', async () => {
    const cache = createCache({ ttl: '10s' })
    const first = cache.getOrLoadResult('k', async () => 'v')
    const second = cache.getOrLoadResult('k', async () => 'other')
    expect(await first).toEqual({ value: 'v', outcome: 'loaded' })
    expect(await second).toEqual({ value: 'v', outcome: 'coalesced' })
    expect(await cache.getOrLoadResult('k', async () => 'other')).toEqual({ value: 'v', outcome: 'hit' })
    expect(cache.stats().hit).toBe(1)
    await cache.close()
  })

  it('reloads after ttl, and null is a cached value', async () => {
    const cache = createCache({ ttl: 1_000 }) // the second call lands well inside it, even on a loaded machine
    let calls = 0
    const loader = async () => {
      calls++
      return null
    }
    expect(await cache.getOrLoad('n', loader)).toBeNull()
    expect(await cache.getOrLoad('n', loader)).toBeNull()
    expect(calls).toBe(1)
    await sleep(1_100)
    await cache.getOrLoad('n', loader)
    expect(calls).toBe(2)
    await cache.close()
  })

  it('rejects every concurrent caller with the loader error, caches nothing, and retries on the next call', async () => {
    const cache = createCache({ ttl: '10s' })
    let calls = 0
    const failing = async () => {
      calls++
      await sleep(20)
      throw new Error('database down')
    }
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => cache.getOrLoad('bad', failing)))
    expect(outcomes.every((o) => o.status === 'rejected' && (o.reason as Error).message === 'database down')).toBe(true)
    expect(calls).toBe(1)
    expect(await cache.getOrLoad('bad', async () => 'recovered')).toBe('recovered')
    await cache.close()
  })

  it('returns undefined and unencodable values to the callers without caching them', async () => {
    const cache = createCache({ ttl: '10s' })
    const reasons: string[] = []
    cache.on('uncacheable', ({ reason }) => reasons.push(reason))
    expect(await cache.getOrLoad('u', async () => undefined)).toBeUndefined()
    let calls = 0
    expect(await cache.getOrLoad('u', async () => (calls++, undefined))).toBeUndefined()
    expect(calls).toBe(1)
    expect(reasons[0]).toMatch(/undefined/)
    await cache.close()
  })

  it('delete drops the entry so the next call loads again', async () => {
    const cache = createCache({ ttl: '10s' })
    await cache.getOrLoad('d', async () => 1)
    await cache.delete('d')
    expect(await cache.getOrLoad('d', async () => 2)).toBe(2)
    await cache.close()
  })

  it('a delete during a load keeps that load out of L1', async () => {
    const cache = createCache({ ttl: '10s' })
    let release!: () => void
    let started!: () => void
    const loaderStarted = new Promise<void>((resolve) => (started = resolve))
    const loading = cache.getOrLoad(
      'race',
      () => new Promise<string>((resolve) => ((release = () => resolve('old')), started())),
    )
    await loaderStarted
    await cache.delete('race')
    release()
    expect(await loading).toBe('old')
    expect(await cache.getOrLoad('race', async () => 'new')).toBe('new')
    await cache.close()
  })

  it('set stores a value that later calls get without loading', async () => {
    const cache = createCache({ ttl: '10s' })
    await cache.set('s', { a: 1 })
    expect(await cache.getOrLoad('s', async () => ({ a: 2 }))).toEqual({ a: 1 })
    await cache.close()
  })

  it('close waits for loads in flight and then refuses new calls', async () => {
    const cache = createCache({ ttl: '10s' })
    let finished = false
    const loading = cache.getOrLoad('c', async () => {
      await sleep(50)
      finished = true
      return 1
    })
    await cache.close()
    expect(finished).toBe(true)
    expect(await loading).toBe(1)
    await expect(cache.getOrLoad('c', async () => 2)).rejects.toMatchObject({ code: 'ERR_SG_CLOSED' })
  })
})
