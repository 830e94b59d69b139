/**
 * Rules 14-16 / acceptance 8 and 9, across real processes: two app instances (forked
 * workers, each its own Express server and cache) share one redis-server, and the test
 * sends concurrent requests to both.
 */
import { describe, expect, it } from 'vitest'
import type { CacheStats } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { useWorkerSuite } from '../support/worker-suite.js'
import { raw, until, type RawResponse } from './helpers.js'

const WORKER = new URL('./fixtures/route-worker.ts', import.meta.url)

describe.skipIf(!redisAvailable)('coalescing across processes', () => {
  const suite = useWorkerSuite(WORKER)
  const redis = suite.redis
  let ports: number[] = []
  let started = 0

  async function start(count: number, routeOptions: object = {}): Promise<void> {
    const workers = await suite.spawn(count, {
      NAMESPACE: `coalescing${++started}`,
      ROUTE_OPTIONS: JSON.stringify(routeOptions),
    })
    ports = await Promise.all(workers.map((worker) => worker.request<number>({ op: 'port' })))
  }

  /** `count` concurrent GETs, spread over the instances. */
  function burst(path: string, count: number): Promise<RawResponse[]> {
    return Promise.all(Array.from({ length: count }, (_, i) => raw(ports[i % ports.length]!, path)))
  }

  const runs = async (name: string) => Number((await redis().get(`runs:${name}`)) ?? 0)
  const stats = async (): Promise<CacheStats[]> =>
    Promise.all(suite.workers().map((worker) => worker.request<CacheStats>({ op: 'stats' })))
  const total = (all: CacheStats[], event: keyof CacheStats) => all.reduce((sum, s) => sum + s[event], 0)

  it('rule 14: on a cold miss one handler runs for 40 requests on 2 processes; all get its response', async () => {
    await start(2)
    const responses = await burst('/product', 40)
    expect(await runs('product')).toBe(1)
    expect(new Set(responses.map((r) => r.status))).toEqual(new Set([200]))
    expect(new Set(responses.map((r) => r.body.toString()))).toEqual(
      new Set(['{"product":42,"name":"Widget","price":9.99}']),
    )
    expect(responses.filter((r) => r.headers['x-cache'] === 'MISS')).toHaveLength(1)
  })

  it('rule 14 with variants: one handler run per Accept-Encoding variant across processes', async () => {
    await start(2)
    const gzip = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        raw(ports[i % 2]!, '/compressed', { headers: { 'accept-encoding': 'gzip' } }),
      ),
    )
    expect(await runs('compressed')).toBe(1)
    expect(new Set(gzip.map((r) => r.body.toString('base64'))).size).toBe(1)
    expect(gzip.every((r) => r.status === 200 && r.headers['content-encoding'] === 'gzip')).toBe(true)
    const plain = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        raw(ports[i % 2]!, '/compressed', { headers: { 'accept-encoding': 'identity' } }),
      ),
    )
    expect(await runs('compressed')).toBe(2)
    expect(
      plain.every(
        (r) =>
          r.status === 200 &&
          r.headers['content-encoding'] === undefined &&
          r.body.toString() === 'compressible '.repeat(100),
      ),
    ).toBe(true)
  })

  for (const kind of ['set-cookie', 'private', 'large']) {
    it(`rule 15: a leader's ${kind} response goes to nobody else; each waiter runs its own handler, then hit-for-miss skips the queue`, async () => {
      await start(2, { hitForMiss: '30s', maxBodyBytes: 1000 })
      const first = await burst(`/uncacheable/${kind}`, 16)
      expect(await runs(`uncacheable-${kind}`)).toBe(16)
      const bodies = first.map((r) => r.body.toString().replace(/\.+$/, ''))
      if (kind === 'large') expect(first.every((r) => r.body.length === 5000)).toBe(true)
      expect(new Set(bodies).size).toBe(16) // nobody received another request's response
      for (const res of first) {
        expect(res.body.length).toBeGreaterThan(0)
        expect(res.status).toBe(200)
        expect(res.headers['x-cache']).toBe('BYPASS')
        if (kind === 'set-cookie') expect(res.headers['set-cookie']?.[0]).toContain(`session=${res.body.toString()}`)
        if (kind === 'large') expect(res.headers['x-cache']).toBe('BYPASS')
      }
      // Hit-for-miss is remembered: the next requests neither wait nor elect a leader.
      const before = await stats()
      const second = await burst(`/uncacheable/${kind}`, 16)
      const after = await stats()
      expect(total(after, 'wait') - total(before, 'wait')).toBe(0)
      expect(total(after, 'leader') - total(before, 'leader')).toBe(0)
      expect(new Set(second.map((r) => r.body.toString())).size).toBe(16)
      expect(await runs(`uncacheable-${kind}`)).toBe(32)
    })
  }

  it('rule 16: a leader whose handler throws gets the error; the waiters are not stranded and queue behind one new leader', async () => {
    await start(2)
    const responses = await burst('/throws', 12)
    const statuses = responses.map((r) => r.status).sort()
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 500])
    for (const res of responses.filter((r) => r.status === 200)) expect(res.body.toString()).toBe('answered by run 2')
    expect(await runs('throws')).toBe(2)
  })

  describe('issue 9.5: a failed leader does not turn coalescing off', () => {
    for (const how of ['500', 'throws']) {
      it(`after one failed leader (${how}), a burst of 20 reaches the handler once more, not 20 times`, async () => {
        await start(2)
        const failed = await raw(ports[0]!, `/flaky/${how}`)
        expect(failed.status).toBe(500)
        const responses = await burst(`/flaky/${how}`, 20)
        expect(await runs(`flaky-${how}`)).toBeLessThanOrEqual(2)
        expect(responses.every((r) => r.status === 200 && r.body.toString() === 'answered by run 2')).toBe(true)
      })
    }

    it('the waiters already queued behind the failed leader queue once more, behind one new leader', async () => {
      await start(2)
      const responses = await burst('/flaky/500', 20)
      expect(await runs('flaky-500')).toBe(2)
      expect(responses.filter((r) => r.status === 500).map((r) => r.body.toString())).toEqual(['failed run 1']) // its own client only
      expect(responses.filter((r) => r.status === 200).every((r) => r.body.toString() === 'answered by run 2')).toBe(
        true,
      )
    })

    it("a handler that always fails: no waiter gets another request's error, and the next request leads again (no hit-for-miss)", async () => {
      await start(2, { hitForMiss: '30s' })
      const first = await burst('/uncacheable/500', 16)
      expect(first.every((r) => r.status === 500)).toBe(true)
      expect(new Set(first.map((r) => r.body.toString())).size).toBe(16) // each got its own run's 500
      const before = await stats()
      await raw(ports[0]!, '/uncacheable/500')
      const after = await stats()
      expect(total(after, 'leader') - total(before, 'leader')).toBe(1)
    })
  })

  it('rule 16: a leader whose handler does not answer within handlerTimeout does not strand the waiters', async () => {
    await start(2, { handlerTimeout: 300 })
    const leader = raw(ports[0]!, '/hangs')
    await until(async () => (await runs('hangs')) === 1, 'the leader to start')
    const waiters = await Promise.all(Array.from({ length: 10 }, (_, i) => raw(ports[i % 2]!, '/hangs')))
    expect(waiters.every((r) => r.status === 200 && /^answered by run \d+$/.test(r.body.toString()))).toBe(true)
    await redis().set('release:hangs', '1')
    const late = await leader
    expect(late.status).toBe(200)
    expect(late.body.toString()).toBe('answered by run 1') // its own client still gets it, streamed, uncached
  })

  it('acceptance 9: a POST to the URL on one process invalidates the entry that every process serves', async () => {
    await start(2)
    await raw(ports[0]!, '/product')
    expect((await raw(ports[1]!, '/product')).headers['x-cache']).toBe('HIT')
    expect((await raw(ports[1]!, '/product', { method: 'POST' })).status).toBe(204)
    const after = await Promise.all([raw(ports[0]!, '/product'), raw(ports[1]!, '/product')])
    expect(after.map((r) => r.headers['x-cache']).sort()).toEqual(['HIT', 'MISS'])
    expect(await runs('product')).toBe(2)
  })
})
