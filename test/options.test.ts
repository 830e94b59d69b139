import { describe, expect, it } from 'vitest'
import { createCache, InvalidArgumentError } from '../src/index.js'
import { parseDuration } from '../src/duration.js'

describe('durations', () => {
  it('accepts milliseconds and unit strings', () => {
    expect(parseDuration('ttl', 1500)).toBe(1500)
    expect(parseDuration('ttl', '250ms')).toBe(250)
    expect(parseDuration('ttl', '30s')).toBe(30_000)
    expect(parseDuration('ttl', '1.5m')).toBe(90_000)
    expect(parseDuration('ttl', '2h')).toBe(7_200_000)
    expect(parseDuration('ttl', '1d')).toBe(86_400_000)
  })

  it.each([0, -1, NaN, Infinity, '', 'soon', '10 parsecs', '-5s', {}])('rejects %s with the option name', (bad) => {
    expect(() => parseDuration('ttl', bad as never)).toThrow(InvalidArgumentError)
    expect(() => parseDuration('ttl', bad as never)).toThrow(/^ttl: /)
  })
})

describe('createCache validation', () => {
  const cases: [string, object, RegExp][] = [
    ['missing ttl', {}, /^ttl: is required/],
    ['zero ttl', { ttl: 0 }, /^ttl: /],
    ['NaN ttl', { ttl: NaN }, /^ttl: /],
    ['unparsable ttl', { ttl: 'forever' }, /^ttl: cannot parse/],
    ['negative staleTtl', { ttl: 1000, staleTtl: -1 }, /^staleTtl: /],
    ['bad onWaitTimeout', { ttl: 1000, onWaitTimeout: 'wait' }, /^onWaitTimeout: /],
    ['bad earlyRefresh', { ttl: 1000, earlyRefresh: 1.5 }, /^earlyRefresh: /],
    ['unknown option', { ttl: 1000, tll: 5 }, /^options\.tll: unknown option/],
    ['bad namespace', { ttl: 1000, namespace: 'a{b}' }, /^namespace: /],
    ['bad l1.max', { ttl: 1000, l1: { max: 0 } }, /^l1\.max: /],
    ['tiny lease', { ttl: 1000, lock: { lease: 5 } }, /^lock\.lease: /],
    ['not a redis client', { ttl: 1000, redis: {} }, /^redis: /],
    ['bad codec', { ttl: 1000, codec: { encode: 1 } }, /^codec: /],
  ]
  it.each(cases)('%s fails fast with a typed error naming the option', (_, options, message) => {
    let thrown: unknown
    try {
      createCache(options as never)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(InvalidArgumentError)
    expect((thrown as Error).message).toMatch(message)
  })
})

describe('getOrLoad argument validation', () => {
  const cache = createCache({ ttl: '1s', maxKeyLength: 16 })
  const loader = async () => 1
  it.each([
    ['empty key', '', loader, undefined, 'key'],
    ['non-string key', 42, loader, undefined, 'key'],
    ['over-long key', 'x'.repeat(17), loader, undefined, 'key'],
    ['loader not a function', 'k', 'nope', undefined, 'loader'],
    ['non-positive ttl override', 'k', loader, { ttl: -5 }, 'ttl'],
    ['unparsable ttl override', 'k', loader, { ttl: 'later' }, 'ttl'],
    ['unknown call option', 'k', loader, { staleTTL: 5 }, 'options.staleTTL'],
  ])('%s rejects with InvalidArgumentError naming %s', async (_, key, fn, options, argument) => {
    const error = await cache.getOrLoad(key as never, fn as never, options as never).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(InvalidArgumentError)
    expect((error as InvalidArgumentError).argument).toBe(argument)
  })
})
