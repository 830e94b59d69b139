/**
 * An independent attack on issue 10 item 5 (data planted in Redis), as a hostile co-tenant:
 * each case plants something planted-data.test.ts does not, on a real redis-server.
 */
import { describe, expect, it } from 'vitest'
import { createCache, RedisUnavailableError, type Cache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { entry, usePlantedSuite } from '../support/planted-suite.js'
import { useRedisPerTest } from '../support/redis-suite.js'
import { sleep, until } from '../support/timing.js'

const YEAR_MS = 365 * 24 * 3_600_000

describe.skipIf(!redisAvailable)('attack: data planted in Redis', () => {
  const suite = usePlantedSuite()
  const { cache, corrupt, redisErrors, serverMs } = suite

  /** The planted value is not served: one load stores 'v', the next call is a hit. */
  async function expectReloaded(c: Cache, key: string): Promise<void> {
    let loads = 0
    const loader = async () => (loads++, 'v')
    expect(await c.getOrLoad(key, loader)).toBe('v')
    expect(await c.getOrLoad(key, loader)).toBe('v')
    expect(loads).toBe(1)
    expect(corrupt).toContain(key)
    expect(redisErrors).toEqual([])
  }

  describe('the fresh copy :v (no expiry)', () => {
    it.each([
      [
        'a ttl t of 0 and x a year ahead',
        (now: number) => `${now + YEAR_MS}|${now + YEAR_MS}|${now + YEAR_MS}|5|0|1|"planted"`,
      ],
      [
        't and x both 10^15 ms ahead',
        (now: number) => `${now + 1e15}|${now + 1e15}|${now + 1e15}|5|${1e15}|1|"planted"`,
      ],
      [
        't above the longest lifetime (366 days), x at its end',
        (now: number) =>
          `${now + YEAR_MS + 86_400_000}|${now + YEAR_MS + 86_400_000}|${now + YEAR_MS + 86_400_000}|5|${YEAR_MS + 86_400_000}|1|"planted"`,
      ],
    ])('%s: not served as fresh', async (_, record) => {
      const c = await cache()
      await suite.admin().set(`${entry('v')}:v`, record(await serverMs()))
      await expectReloaded(c, 'v')
    })
  })

  describe("messages planted on the key's channel", () => {
    it.each([
      ['a server time that is not a number', 'c|abc|1|1|1|1|1|1|"planted"'],
      ['an empty server time', 'c||1|1|1|1|1|1|"planted"'],
    ])(
      'a commit message with %s: corrupt, the waiter re-checks and loads once the planted lock ends',
      async (_, message) => {
        const c = await cache({ l1: { maxTtl: Infinity }, lock: { lease: 1_000 }, waitTimeout: '8s' })
        await suite.admin().set(`${entry('m')}:lock`, 'nobody:1', 'PX', 1_000)
        let loads = 0
        const waiting = c.getOrLoad('m', async () => (loads++, 'v'))
        await until(
          async () => ((await suite.admin().pubsub('NUMSUB', `${entry('m')}:ch`)) as [string, number])[1] > 0,
          'the waiter to subscribe',
          5_000,
        )
        await suite.admin().publish(`${entry('m')}:ch`, message)
        expect(await waiting).toBe('v') // the planted lock ran out: loaded, not the planted value
        expect(loads).toBe(1)
        expect(await c.getOrLoad('m', async () => (loads++, 'again'))).toBe('v')
        expect(corrupt).toContain('m')
        expect(redisErrors).toEqual([])
      },
    )
  })

  describe('the entry hash: deadlines consistent with its own ttl', () => {
    it('x a year ahead with t = 30 s, on a hash that expires in two years: a miss, reloaded (not fresh for a year)', async () => {
      const c = await cache()
      const now = await serverMs()
      const x = String(now + YEAR_MS)
      await suite.admin().hset(entry('h'), 'd', '"planted"', 'x', x, 's', x, 'e', x, 'l', '5', 't', '30000', 'f', '1')
      await suite.admin().pexpire(entry('h'), 2 * YEAR_MS)
      await expectReloaded(c, 'h')
      expect(await suite.admin().pttl(`${entry('h')}:v`)).toBeLessThanOrEqual(30_000)
    })
  })
})

describe.skipIf(!redisAvailable)('attack: a set() replayed after a reconnect', () => {
  const caches: Cache[] = []
  const perTest = useRedisPerTest(() => Promise.all(caches.splice(0).map((cache) => cache.close())))

  it('a set() that was rejected while Redis hung does not leave its old value over a newer set() once its client reconnects', async () => {
    const server = await perTest.start()
    // a's client reconnects late: another process writes first on the restarted server.
    const slow = server.client({ retryStrategy: () => 1_500 })
    slow.on('error', () => {})
    const a = createCache({ redis: slow, ttl: '10m', redisTimeout: 300, l1: false })
    caches.push(a)
    await a.ready()
    server.pause() // SIGSTOP: a's set() waits in the socket, unanswered
    await expect(a.set('k', 'old')).rejects.toBeInstanceOf(RedisUnavailableError)
    await server.kill() // ioredis keeps the unanswered commit and resends it after reconnecting
    await server.restart()
    const fast = server.client()
    const b = createCache({ redis: fast, ttl: '10m', redisTimeout: 300, l1: false })
    caches.push(b)
    await b.set('k', 'new') // acknowledged: the newest value
    await until(() => slow.status === 'ready', 'a to reconnect', 20_000)
    await slow.ping() // behind whatever a's client resent
    await sleep(50)
    // The late write is undone behind it (a delete), so the next call loads: never the old value.
    expect(await fast.hget(entry('k'), 'd')).not.toBe('"old"')
    expect(['new', 'loaded']).toContain(await b.getOrLoad('k', async () => 'loaded'))
    expect(await fast.pttl(entry('k'))).toBeGreaterThan(0)
  })
})
