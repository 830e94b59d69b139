import { describe, expect, expectTypeOf, it } from 'vitest'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'
import { sleep } from '../support/timing.js'

function invalidArgument(argument: string) {
  return expect.objectContaining({ name: 'InvalidArgumentError', argument })
}

describe.skipIf(!redisAvailable)('cache.wrap', () => {
  const { cache } = useCacheSuite()

  it('caches per key: 30 concurrent calls over 3 argument pairs run fn 3 times; a second cache (process) runs it 0 times', async () => {
    const runs: string[] = []
    const sum = async (a: number, b: number) => {
      runs.push(`${a}+${b}`)
      await sleep(30)
      return { total: a + b }
    }
    const options = { key: (a: number, b: number) => `sum:${a}:${b}`, ttl: '1m' }
    const cachedSum = cache().wrap(sum, options)
    expectTypeOf(cachedSum).toEqualTypeOf<(a: number, b: number) => Promise<{ total: number }>>()
    const pairs: [number, number][] = [
      [1, 2],
      [3, 4],
      [5, 6],
    ]
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => cachedSum(...pairs[i % 3]!)))
    expect(results.slice(0, 3)).toEqual([{ total: 3 }, { total: 7 }, { total: 11 }])
    expect(runs.sort()).toEqual(['1+2', '3+4', '5+6'])
    const elsewhere = cache().wrap(sum, options)
    expect(await elsewhere(3, 4)).toEqual({ total: 7 })
    expect(runs).toHaveLength(3)
  })

  it('passes call options through: tags make the wrapped entries invalidatable', async () => {
    let runs = 0
    const c = cache()
    const load = c.wrap(async (id: string) => `${id}#${++runs}`, { key: (id) => `item:${id}`, tags: ['items'] })
    expect(await load('a')).toBe('a#1')
    expect(await load('a')).toBe('a#1')
    await c.deleteByTag('items')
    expect(await load('a')).toBe('a#2')
  })

  it('bad fn, options, key function or call option: InvalidArgumentError naming it, at wrap time', () => {
    const c = cache()
    const fn = async (id: string) => id
    expect(() => c.wrap('nope' as unknown as typeof fn, { key: (id) => id })).toThrow(invalidArgument('fn'))
    expect(() => c.wrap(fn, null as unknown as { key: (id: string) => string })).toThrow(invalidArgument('options'))
    expect(() => c.wrap(fn, {} as { key: (id: string) => string })).toThrow(invalidArgument('options.key'))
    expect(() => c.wrap(fn, { key: (id) => id, ttl: 'soon' })).toThrow(invalidArgument('ttl'))
    const unknownOption = { key: (id: string) => id, bogus: 1 }
    expect(() => c.wrap(fn, unknownOption)).toThrow(invalidArgument('options.bogus'))
    expect(() => c.wrap(fn, { key: (id) => id, forceRefresh: 'y' as unknown as boolean })).toThrow(
      invalidArgument('forceRefresh'),
    )
  })

  it('a bad key from the key function rejects that call (argument key) and fn does not run; a throwing key function rejects with its error', async () => {
    let runs = 0
    const c = cache()
    const load = c.wrap(
      async (id: string) => {
        runs++
        return id
      },
      { key: (id) => id },
    )
    await expect(load('')).rejects.toEqual(invalidArgument('key'))
    const throwing = c.wrap(async (id: string) => id, {
      key: () => {
        throw new TypeError('no key for that')
      },
    })
    await expect(throwing('x')).rejects.toThrow('no key for that')
    expect(runs).toBe(0)
    expect(await load('ok')).toBe('ok')
  })
})
