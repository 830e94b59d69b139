/**
 * Data planted in Redis, or corrupted there, by another client (issue 10 item 5): every field
 * the scripts read is validated. Each case is a miss (or a repair) with a `corrupt` event,
 * never an error, a lock held for ever or a value fresh for ever; every key a script wrote
 * ends with an expiry; the token counter never falls below the server clock in µs.
 */
import { describe, expect, it } from 'vitest'
import { type Cache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { entry, usePlantedSuite } from '../support/planted-suite.js'
import { until } from '../support/timing.js'

const HOUR_MS = 3_600_000

describe.skipIf(!redisAvailable)('data planted in Redis', () => {
  const suite = usePlantedSuite()
  const { cache, corrupt, redisErrors, serverMicros, serverMs } = suite
  const isInteger = (text: string | null | undefined) => typeof text === 'string' && /^\d+$/.test(text)

  /** The invariant: no key left without an expiry (planted ones included: the scripts repaired them). */
  async function expectEveryKeyExpires(): Promise<void> {
    for (const key of await suite.admin().keys('*')) expect(await suite.admin().pttl(key), key).not.toBe(-1)
  }

  /** One load stores 'v' in Redis; the next call is a hit; the planted data was reported. */
  async function expectRepairedBy(c: Cache, key: string): Promise<void> {
    let loads = 0
    const loader = async () => (loads++, 'v')
    expect(await c.getOrLoad(key, loader)).toBe('v')
    expect(await c.getOrLoad(key, loader)).toBe('v')
    expect(loads).toBe(1)
    expect(await suite.admin().hget(entry(key), 'd')).toBe('"v"')
    expect(corrupt).toContain(key)
    expect(redisErrors).toEqual([])
    await expectEveryKeyExpires()
  }

  describe('the token counter c', () => {
    const garbage = ['abc', '12.5', '1e400', '9223372036854775807', '9007199254740993', '-5']

    it.each(garbage)('c = %s (no expiry): a lookup repairs it to at least the server clock in µs', async (planted) => {
      const c = await cache()
      await suite.admin().hset(entry('c'), 'c', planted)
      const before = await serverMicros()
      await expectRepairedBy(c, 'c')
      const [counter, fence] = await suite.admin().hmget(entry('c'), 'c', 'f')
      expect(isInteger(counter) && isInteger(fence)).toBe(true)
      expect(BigInt(fence!)).toBeGreaterThanOrEqual(before) // the value's token
      expect(BigInt(counter!)).toBeGreaterThanOrEqual(BigInt(fence!))
      expect(BigInt(counter!)).toBeLessThan(before + 3_600_000_000n)
    })

    it.each(garbage)('c = %s: set() takes a token above the server clock and writes', async (planted) => {
      const c = await cache()
      await suite.admin().hset(entry('s'), 'c', planted)
      const before = await serverMicros()
      await c.set('s', 'w')
      expect(await suite.admin().hget(entry('s'), 'd')).toBe('"w"')
      expect(BigInt((await suite.admin().hget(entry('s'), 'f'))!)).toBeGreaterThanOrEqual(before)
      expect(corrupt).toContain('s')
      await expectEveryKeyExpires()
    })

    it.each(garbage)('c = %s: delete() raises the fence to a number, and the next load is stored', async (planted) => {
      const c = await cache()
      await suite.admin().hset(entry('del'), 'c', planted)
      const before = await serverMicros()
      await c.delete('del')
      const [counter, fence] = await suite.admin().hmget(entry('del'), 'c', 'f')
      expect(isInteger(counter) && isInteger(fence)).toBe(true)
      expect(BigInt(fence!)).toBeGreaterThanOrEqual(before)
      expect(BigInt(fence!)).toBeLessThan(before + 3_600_000_000n)
      expect(corrupt).toContain('del')
      corrupt.length = 0
      expect(await c.getOrLoad('del', async () => 'v')).toBe('v')
      expect(await suite.admin().hget(entry('del'), 'd')).toBe('"v"')
      expect(suite.fenced()).toBe(0)
      await expectEveryKeyExpires()
    })
  })

  describe('the fence f', () => {
    it.each(['garbage', '1e400', '99999999999999999', '-1'])(
      'f = %s: the lookup raises it above every token issued, and the load is stored',
      async (planted) => {
        const c = await cache()
        await suite.admin().hset(entry('f'), 'f', planted, 'c', '7')
        await suite.admin().pexpire(entry('f'), 60_000)
        const before = await serverMicros()
        await expectRepairedBy(c, 'f')
        expect(BigInt((await suite.admin().hget(entry('f'), 'f'))!)).toBeGreaterThanOrEqual(before)
        expect(suite.fenced()).toBe(0)
        expect(await suite.admin().exists(`${entry('f')}:lock`)).toBe(0)
      },
    )

    it('f corrupted while the leader loads: the commit refuses, releases the lock and says so; the next load is stored', async () => {
      const c = await cache()
      expect(
        await c.getOrLoad('mid', async () => {
          await suite.admin().hset(entry('mid'), 'f', 'garbage')
          return 'v1'
        }),
      ).toBe('v1')
      expect(await suite.admin().exists(`${entry('mid')}:lock`)).toBe(0) // not left held for a lease
      expect(redisErrors).toEqual([])
      expect(corrupt).toContain('mid')
      corrupt.length = 0
      expect(await c.getOrLoad('mid', async () => 'v2')).toBe('v2')
      expect(await suite.admin().hget(entry('mid'), 'd')).toBe('"v2"')
      expect(corrupt).toContain('mid') // the lookup repaired the fence
      await expectEveryKeyExpires()
    })
  })

  describe('the markers p (hit-for-miss) and n (negative caching)', () => {
    const values = (now: number) => [['1e400'], ['99999999999999999'], [String(now + 10 * 60_000)]]

    it.each(['p', 'n'])(
      '%s far ahead, or plausible on a hash without expiry: a miss that loads and stores',
      async (marker) => {
        const now = await serverMs()
        for (const [planted] of values(now)) {
          const c = await cache()
          const key = `${marker}-${planted}`
          await suite.admin().hset(entry(key), marker, planted!, 'm', 'e|["Error","planted"]')
          await expectRepairedBy(c, key)
          expect(await suite.admin().hexists(entry(key), marker)).toBe(0)
        }
      },
    )

    it('a marker within a hash that expires before it: not trusted past the hash', async () => {
      const c = await cache()
      const now = await serverMs()
      await suite.admin().hset(entry('short'), 'p', String(now + HOUR_MS))
      await suite.admin().pexpire(entry('short'), 60_000)
      await expectRepairedBy(c, 'short')
    })

    it('n with a message m that is not an error frame: ignored and removed', async () => {
      const c = await cache()
      const now = await serverMs()
      await suite.admin().hset(entry('nm'), 'n', String(now + 30_000), 'm', 'not an error frame')
      await suite.admin().pexpire(entry('nm'), 60_000)
      await expectRepairedBy(c, 'nm')
    })
  })

  describe('the lock', () => {
    it('a lock string without an expiry gets the lease: the caller waits one lease, not waitTimeout', async () => {
      const c = await cache({ lock: { lease: 300 }, waitTimeout: '8s', onWaitTimeout: 'throw' })
      await suite.admin().set(`${entry('l')}:lock`, 'nobody:1')
      const outcomes: string[] = []
      c.on('waited', ({ outcome }) => outcomes.push(outcome))
      const started = performance.now()
      await expectRepairedBy(c, 'l')
      expect(outcomes).not.toContain('timeout')
      expect(performance.now() - started).toBeLessThan(5_000) // generous: one 300 ms lease plus polls
    })

    it('a lock key of a foreign type (a hash, no expiry) is removed: the caller loads at once', async () => {
      const c = await cache({ waitTimeout: '8s', onWaitTimeout: 'throw' })
      await suite.admin().hset(`${entry('lh')}:lock`, 'x', '1')
      let waits = 0
      c.on('wait', () => waits++)
      await expectRepairedBy(c, 'lh')
      expect(waits).toBe(0)
    })

    it('a lock replaced by a foreign type while the leader loads: commit and release answer, no Redis error', async () => {
      const c = await cache()
      expect(
        await c.getOrLoad('lc', async () => {
          await suite.admin().del(`${entry('lc')}:lock`)
          await suite.admin().hset(`${entry('lc')}:lock`, 'x', '1')
          return 'v'
        }),
      ).toBe('v')
      await expect(
        c.getOrLoad('lr', async () => {
          await suite.admin().del(`${entry('lr')}:lock`)
          await suite.admin().hset(`${entry('lr')}:lock`, 'x', '1')
          throw new Error('load failed')
        }),
      ).rejects.toThrow('load failed')
      expect(redisErrors).toEqual([])
      expect(await suite.admin().hget(entry('lc'), 'd')).toBe('"v"')
      expect(await c.getOrLoad('lr', async () => 'w')).toBe('w') // the foreign key is cleared, not waited on
      expect(corrupt).toEqual(expect.arrayContaining(['lc', 'lr']))
      await expectEveryKeyExpires()
    })
  })

  describe('the value: deadlines x, s, e, load time l, ttl t', () => {
    it.each([
      ['1e400', '1e400', '1e400', false],
      ['inf', 'inf', 'inf', false],
      ['nan', 'nan', 'nan', false],
      ['-1', '-1', '-1', true],
      ['99999999999999999', '99999999999999999', '99999999999999999', true],
      ['+1h', '+1h', '+1h', false], // plausible, on a hash without expiry
      ['+60s', '+30s', '+90s', true], // fresh after grace
    ])('x = %s, s = %s, e = %s (expiry: %s): a miss, reloaded', async (x, s, e, expires) => {
      const c = await cache()
      const now = await serverMs()
      const at = (text: string) =>
        text === '+1h'
          ? String(now + HOUR_MS)
          : text === '+60s'
            ? String(now + 60_000)
            : text === '+30s'
              ? String(now + 30_000)
              : text === '+90s'
                ? String(now + 90_000)
                : text
      await suite
        .admin()
        .hset(entry('x'), 'd', '"planted"', 'x', at(x), 's', at(s), 'e', at(e), 'l', '5', 't', '30000', 'f', '1')
      if (expires) await suite.admin().pexpire(entry('x'), 2 * HOUR_MS)
      await expectRepairedBy(c, 'x')
    })

    it.each([
      ['l', 'abc'],
      ['l', '1e400'],
      ['t', 'abc'],
      ['t', '1e400'],
      ['t', '99999999999999999'],
    ])('%s = %s: a miss, reloaded', async (field, planted) => {
      const c = await cache()
      const now = await serverMs()
      await suite
        .admin()
        .hset(
          entry('lt'),
          'd',
          '"planted"',
          'x',
          String(now + 60_000),
          's',
          String(now + 60_000),
          'e',
          String(now + 60_000),
          'l',
          '5',
          't',
          '60000',
          'f',
          '1',
        )
      await suite.admin().hset(entry('lt'), field, planted)
      await suite.admin().pexpire(entry('lt'), 120_000)
      await expectRepairedBy(c, 'lt')
    })

    it('a garbage backoff-until b on a value in grace is dropped: the value is refreshed, not served stale for ever', async () => {
      const c = await cache()
      const now = await serverMs()
      await suite
        .admin()
        .hset(
          entry('b'),
          'd',
          '"old"',
          'x',
          String(now - 1_000),
          's',
          String(now + 60_000),
          'e',
          String(now + 60_000),
          'l',
          '5',
          't',
          '1000',
          'f',
          '1',
          'b',
          '1e400',
        )
      await suite.admin().pexpire(entry('b'), 60_000)
      let loads = 0
      expect(await c.getOrLoad('b', async () => (loads++, 'new'))).toBe('old') // grace: stale at once, refreshed behind
      await until(
        async () => (await suite.admin().hget(entry('b'), 'd')) === '"new"',
        'the refresh to be stored',
        5_000,
      )
      expect(loads).toBe(1)
      expect(corrupt).toContain('b')
      await expectEveryKeyExpires()
    })
  })

  describe('the fresh copy :v, read with a plain GET', () => {
    it.each([
      ['past its own fresh-until (no expiry)', -HOUR_MS, 30_000],
      ['fresh for longer than its own ttl (no expiry)', HOUR_MS, 1_000],
    ])('%s: corrupt, so the script decides (a miss here)', async (_, freshFor, ttl) => {
      const c = await cache()
      const now = await serverMs()
      const x = now + freshFor
      await suite.admin().set(`${entry('v')}:v`, `${x}|${x}|${x}|5|${ttl}|1|"planted"`)
      await expectRepairedBy(c, 'v')
    })
  })
})
