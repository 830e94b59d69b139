import { describe, expect, it } from 'vitest'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'

function invalidArgument(argument: string) {
  return expect.objectContaining({ name: 'InvalidArgumentError', argument })
}

describe.skipIf(!redisAvailable)('cache.batcher', () => {
  const { cache } = useCacheSuite()

  it('100 concurrent loads in one tick (10 keys asked twice): ONE batch-loader call with the 90 distinct keys', async () => {
    const batches: string[][] = []
    const batcher = cache().batcher(async (keys: string[]) => {
      batches.push(keys)
      return keys.map((key) => `v:${key}`)
    })
    const keys = Array.from({ length: 100 }, (_, i) => `k${i % 90}`)
    const values = await Promise.all(keys.map((key) => batcher.load(key)))
    expect(values).toEqual(keys.map((key) => `v:${key}`))
    expect(batches).toHaveLength(1)
    expect(batches[0]).toHaveLength(90)
  })

  it('loads asked for after an await in the same tick join the batch; the next tick is a new batch (of what is not cached)', async () => {
    const batches: string[][] = []
    const batcher = cache().batcher((keys: string[]) => {
      batches.push(keys)
      return keys
    })
    const first = batcher.load('a')
    await Promise.resolve()
    const second = batcher.load('b')
    expect(await Promise.all([first, second])).toEqual(['a', 'b'])
    expect(await Promise.all([batcher.load('a'), batcher.load('c')])).toEqual(['a', 'c'])
    expect(batches).toEqual([['a', 'b'], ['c']])
  })

  it('maxBatchSize splits a tick into several getOrLoadMany calls', async () => {
    const batches: string[][] = []
    const batcher = cache().batcher(
      (keys: string[]) => {
        batches.push(keys)
        return keys
      },
      { maxBatchSize: 4 },
    )
    await Promise.all(Array.from({ length: 10 }, (_, i) => batcher.load(`m${i}`)))
    expect(batches.map((batch) => batch.length)).toEqual([4, 4, 2])
  })

  it('a bad key rejects its own load only; one key failing in the batch fails only its load', async () => {
    const batcher = cache().batcher((keys: string[]) => new Map(keys.filter((k) => k !== 'gone').map((k) => [k, k])))
    const [bad, gone, fine] = await Promise.allSettled([batcher.load(''), batcher.load('gone'), batcher.load('fine')])
    expect(bad).toMatchObject({ status: 'rejected', reason: invalidArgument('key') })
    expect(gone).toMatchObject({ status: 'rejected', reason: { name: 'BatchResultError', key: 'gone' } })
    expect(fine).toEqual({ status: 'fulfilled', value: 'fine' })
  })

  it('bad batch loader or options: InvalidArgumentError naming it, at creation', () => {
    const c = cache()
    const load = (keys: string[]) => keys
    expect(() => c.batcher('x' as unknown as typeof load)).toThrow(invalidArgument('batchLoader'))
    expect(() => c.batcher(load, { maxBatchSize: 0 })).toThrow(invalidArgument('maxBatchSize'))
    expect(() => c.batcher(load, { maxBatchSize: 10_001 })).toThrow(invalidArgument('maxBatchSize'))
    expect(() => c.batcher(load, { ttl: 'soon' })).toThrow(invalidArgument('ttl'))
    expect(() => c.batcher(load, { forceRefresh: true })).toThrow(invalidArgument('forceRefresh'))
  })
})
