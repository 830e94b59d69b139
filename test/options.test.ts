import { describe, expect, it } from 'vitest'
import { createCache, InvalidArgumentError } from '../src/index.js'
import { MAX_LIFETIME_MS, MAX_TIMER_MS, parseDuration } from '../src/duration.js'
import { fixedCallOptions, isFixedCallOptions } from '../src/settings.js'

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

  it.each([0.4, '0.3ms', '0.0001s'])('rejects %s, which rounds to 0 ms, as it rejects 0', (tiny) => {
    expect(() => parseDuration('ttl', tiny)).toThrow(/^ttl: .*rounds to 0 ms/)
    expect(() => parseDuration('softTimeout', tiny, true)).toThrow(/^softTimeout: .*rounds to 0 ms/) // not silently "off"
  })
})

/** Every duration that arms a Node timer, as a createCache option: a value above 2³¹−1 ms would fire after 1 ms. */
const TIMER_OPTIONS: [string, (d: string | number) => object][] = [
  ['hardTimeout', (d) => ({ hardTimeout: d })],
  ['softTimeout', (d) => ({ softTimeout: d })],
  ['waitTimeout', (d) => ({ waitTimeout: d })],
  ['failSafeBackoff', (d) => ({ failSafeBackoff: d })],
  ['lock.lease', (d) => ({ lock: { lease: d, maxHold: d } })],
  ['lock.maxHold', (d) => ({ lock: { maxHold: d } })],
  ['lock.pollInterval', (d) => ({ lock: { pollInterval: d, maxPollInterval: d } })],
  ['lock.maxPollInterval', (d) => ({ lock: { maxPollInterval: d } })],
  ['redisTimeout', (d) => ({ redisTimeout: d })],
  ['circuitBreaker.openFor', (d) => ({ circuitBreaker: { openFor: d } })],
]

describe('duration limits', () => {
  const create = (options: object) => () => createCache({ ttl: '1h', ...options } as never)
  const argumentOf = (run: () => unknown): string | undefined => {
    try {
      run()
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidArgumentError)
      return (error as InvalidArgumentError).argument
    }
    return undefined
  }

  it.each(TIMER_OPTIONS)("%s above 2^31-1 ms (e.g. '30d') is rejected, naming the option", (name, options) => {
    expect(argumentOf(create(options('30d')))).toBe(name)
    expect(argumentOf(create(options(MAX_TIMER_MS + 1)))).toBe(name)
    expect(argumentOf(create(options(MAX_TIMER_MS)))).toBeUndefined() // the limit itself is fine
  })

  it.each(['hardTimeout', 'softTimeout', 'waitTimeout'])(
    'per call, %s above the timer limit is rejected too',
    async (name) => {
      const cache = createCache({ ttl: '1h' })
      const error = await cache.getOrLoad('k', async () => 1, { [name]: '30d' }).catch((e: unknown) => e)
      expect((error as InvalidArgumentError).argument).toBe(name)
      await cache.close()
    },
  )

  it.each([
    ['ttl', { ttl: 1e20 }],
    ['ttl', { ttl: '366d' }],
    ['staleTtl', { staleTtl: 1e20 }],
    ['staleIfError', { staleIfError: '400d' }],
    ['l1.maxTtl', { l1: { maxTtl: 1e20 } }],
  ])('a lifetime above one year is rejected (%s)', (name, options) => {
    expect(argumentOf(create(options))).toBe(name)
  })

  it('accepts lifetimes up to one year, beyond the timer limit', () => {
    expect(argumentOf(create({ ttl: MAX_LIFETIME_MS, staleTtl: '365d', staleIfError: '365d' }))).toBeUndefined()
  })

  it("a loader's cacheFor({ ttl: 1e20 }) fails the load with the option named, before anything is written", async () => {
    const cache = createCache({ ttl: '1h' })
    const error = await cache.getOrLoad('k', (context) => (context.cacheFor({ ttl: 1e20 }), 1)).catch((e: unknown) => e)
    expect((error as InvalidArgumentError).argument).toBe('ttl')
    await cache.close()
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

describe('fixed call options (an HTTP route passes the same options on every request)', () => {
  it('are frozen with what they hold, so the policy resolved once cannot go stale', () => {
    const fixed = fixedCallOptions({ ttl: '1s', earlyRefresh: { beta: 1 } })
    expect(Object.isFrozen(fixed) && Object.isFrozen(fixed.earlyRefresh)).toBe(true)
    expect(isFixedCallOptions(fixed)).toBe(true)
    expect(isFixedCallOptions({ ttl: '1s' })).toBe(false) // a caller's own object is resolved on every call
  })

  it('are still checked: a bad one fails every call with the option named, never a cached policy', async () => {
    const cache = createCache({ ttl: '1h' })
    const bad = fixedCallOptions({ ttl: 'soon' } as never)
    for (let i = 0; i < 2; i++) await expect(cache.getOrLoad('k', async () => 1, bad)).rejects.toThrow(/^ttl: /)
    await cache.close()
  })

  it('resolve against each cache: two caches with other defaults keep their own policy', async () => {
    const fixed = fixedCallOptions({ ttl: '1h' })
    const [a, b] = [createCache({ ttl: '1s', hardTimeout: '50ms' }), createCache({ ttl: '1s' })]
    const slow = () => new Promise<number>((resolve) => setTimeout(() => resolve(1), 300))
    // a's default hardTimeout applies to a's calls, and not to b's, through the same fixed options
    await expect(a.getOrLoad('k', slow, fixed)).rejects.toThrow(/50 ms|hardTimeout|timed out/i)
    await expect(b.getOrLoad('k', slow, fixed)).resolves.toBe(1)
    await expect(a.getOrLoad('j', slow, fixed)).rejects.toThrow(/50 ms|hardTimeout|timed out/i)
    await Promise.all([a.close(), b.close()])
  })
})
