/**
 * An invalidation storm, counted (the timings are `npm run bench:invalidation-storm`): a
 * receiver child process holds 5,000 keys in L1 and is stopped (SIGSTOP) for the 5 s in which
 * this process deletes them at 5,000 a second. The deletes of one tick travel as one message
 * (one invalidate.lua call), a message carries each key once and the cache's id once, the
 * receiver keeps its subscriber connection, and once it runs again it serves none of the
 * deleted values. Before batching, the same storm was 25,000 messages of about 80 bytes plus
 * the key each.
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { connectionCounts, countChannel, stalled, storm } from '../support/invalidation-storm.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'
import { until } from '../support/timing.js'
import { forkWorker, type Worker } from '../support/workers.js'

const RECEIVER = new URL('../fixtures/storm-receiver.ts', import.meta.url)
const CHANNEL = 'sg:__invalidations'
const PROBE = 'storm-probe'

describe.skipIf(!redisAvailable)('an invalidation storm', () => {
  let receiver: Worker | undefined
  const caches: Cache[] = []
  const suite = useRedisServer({
    flush: true,
    cleanup: async () => {
      await receiver?.stop()
      receiver = undefined
      await Promise.all(caches.splice(0).map((cache) => cache.close()))
    },
  })

  const cache = async (client: Redis, l1: boolean): Promise<Cache> => {
    const created = createCache({ redis: client, ttl: '10m', l1: l1 ? { maxTtl: '10m' } : false })
    caches.push(created)
    await created.ready()
    return created
  }

  it('a receiver stopped for 5 s during 5,000 deletes/s keeps its subscriber and serves no deleted value', async () => {
    const keys = Array.from({ length: 5_000 }, (_, i) => `item:${i}`)
    receiver = await forkWorker(RECEIVER, { env: { REDIS_URL: suite.server().url } })
    expect(await receiver.request<number>({ op: 'fill', keys, marker: 'storm-end' }, 60_000)).toBe(keys.length)
    const sender = await cache(suite.client(), false)
    const channel = await countChannel(suite.client({ connectionName: PROBE }), CHANNEL)
    const before = await connectionCounts(suite.admin())

    const { deletes, refused, peakOutputBuffer } = await stalled(receiver, () =>
      storm(sender, suite.admin(), keys, { rate: 5_000, durationMs: 5_000, probeName: PROBE }),
    )
    expect(deletes).toBe(25_000)
    expect(refused).toBe(0)
    // The storm ends with a tag's invalidation, on the same subscriber connection after every delete.
    await sender.deleteByTag('storm-end')
    expect(await receiver.request<boolean>({ op: 'tag-seen', tag: 'storm-end', timeoutMs: 30_000 }, 40_000)).toBe(true)

    expect(await receiver.request<number>({ op: 'losses' })).toBe(0)
    const after = await connectionCounts(suite.admin())
    expect(after.accepted).toBe(before.accepted) // no client reconnected
    if (after.bufferKills !== undefined) expect(after.bufferKills).toBe(before.bufferKills)
    expect(await receiver.request<number>({ op: 'check', keys }, 60_000)).toBe(0)

    // One message per tick of deletes (50 a step, 500 steps, fewer when steps late on a busy
    // machine fall in one tick; the tag's member 1 more), not one per delete; about the key's
    // own bytes per delete.
    await until(() => channel.last.includes('storm-marker'), 'the probe to see the storm end')
    const keyBytes = keys.reduce((sum, key) => sum + key.length, 0) / keys.length
    expect(channel.messages).toBeLessThanOrEqual(501)
    expect(channel.bytes / deletes).toBeLessThan(keyBytes + 8)
    console.log(
      `${deletes} deletes: ${channel.messages} messages, ${(channel.bytes / deletes).toFixed(1)} bytes/delete ` +
        `(keys ${keyBytes.toFixed(1)} bytes), receiver's peak output buffer ${peakOutputBuffer} bytes`,
    )
  })

  it('keys of any text arrive whole in one message, and a one-key message of the old form still drops its key', async () => {
    const [a, b] = [await cache(suite.client(), true), await cache(suite.client(), true)]
    const channel = await countChannel(suite.client(), CHANNEL)
    const keys = [
      'plain',
      'with|bar',
      '["looks","like","json"]',
      '[',
      'line\nbreak',
      '"quoted"',
      'emoji 😀',
      'a'.repeat(1024),
    ]
    for (const key of keys) expect(await a.getOrLoad(key, async () => `old:${key}`)).toBe(`old:${key}`)
    await Promise.all(keys.map((key) => b.delete(key)))
    await until(() => channel.messages >= 1, 'the message')
    expect(channel.messages).toBe(1) // one tick, one message
    for (const key of keys)
      await until(async () => (await a.getOrLoad(key, async () => `new:${key}`)) === `new:${key}`, `${key} to go`)

    // A process of the version that published one key per message, `<id>|<key>`: its delete is
    // done in Redis (here by hand), and its message must still drop a's copy.
    expect(await a.getOrLoad('old-form', async () => 'v1')).toBe('v1')
    await suite.admin().del('sg:{k:old-form}', 'sg:{k:old-form}:v')
    expect(await a.getOrLoad('old-form', async () => 'unused')).toBe('v1') // from L1, untold yet
    await suite.admin().publish(CHANNEL, 'another-cache-id|old-form')
    await until(async () => (await a.getOrLoad('old-form', async () => 'v2')) === 'v2', 'the old form to drop it')
  })

  it("deleteByTag's members and a burst of set()s each go out as one message per tick", async () => {
    const [a, b] = [await cache(suite.client(), true), await cache(suite.client(), true)]
    const channel = await countChannel(suite.client(), CHANNEL)
    const members = Array.from({ length: 200 }, (_, i) => `tagged:${i}`)
    for (const key of members) await a.getOrLoad(key, async () => `old:${key}`, { tags: ['group'] })
    await b.deleteByTag('group')
    await until(() => channel.messages >= 1, 'the members message')
    for (const key of members) expect(await a.getOrLoad(key, async () => `new:${key}`)).toBe(`new:${key}`)
    expect(channel.messages).toBe(1) // 200 members, one step of the scan: one message

    // Each set() is announced once its own commit is answered: those answered in one tick, together.
    await Promise.all(members.map((key) => b.set(key, `set:${key}`)))
    for (const key of members)
      await until(async () => (await a.getOrLoad(key, async () => 'unused')) === `set:${key}`, `a to drop ${key}`)
    expect(channel.messages - 1).toBeGreaterThanOrEqual(1)
    expect(channel.messages - 1).toBeLessThanOrEqual(members.length / 10)
  })

  it('20,000 deletes in one tick fit a command budget of 4 in flight and 40 queued: 40 calls, not 20,000', async () => {
    const client = suite.client()
    const a = await cache(client, true)
    const b = createCache({
      redis: suite.client(),
      ttl: '10m',
      l1: false,
      redisCommands: { maxInFlight: 4, maxQueued: 40 },
    })
    caches.push(b)
    await b.ready()
    const keys = Array.from({ length: 20_000 }, (_, i) => `burst:${i}`)
    await Promise.all(keys.slice(0, 100).map((key) => a.getOrLoad(key, async () => `old:${key}`)))
    const channel = await countChannel(suite.client(), CHANNEL)
    const counted = suite.client()
    await counted.config('RESETSTAT')
    const results = await Promise.allSettled(keys.map((key) => b.delete(key)))
    expect(results.filter((result) => result.status === 'rejected').length).toBe(0) // one budget slot per 500 keys
    const stats = await counted.info('commandstats')
    const sent =
      Number(/^cmdstat_evalsha:calls=(\d+)/m.exec(stats)?.[1] ?? 0) +
      Number(/^cmdstat_eval:calls=(\d+)/m.exec(stats)?.[1] ?? 0)
    expect(sent).toBe(40)
    await until(() => channel.messages === 40, 'the 40 messages')
    for (const key of keys.slice(0, 100))
      await until(async () => (await a.getOrLoad(key, async () => `new:${key}`)) === `new:${key}`, `a to drop ${key}`)
  })

  it('a delete() left in a batch when its cache closes settles (it does not hang)', async () => {
    const a = await cache(suite.client(), false)
    const deleting = a.delete('k').then(
      () => 'resolved',
      (error: unknown) => (error as Error).name,
    )
    await a.close()
    const settled = await Promise.race([
      deleting,
      new Promise((resolve) => setTimeout(() => resolve('pending'), 5_000)),
    ])
    expect(['resolved', 'RedisUnavailableError', 'CacheClosedError']).toContain(settled)
  })

  it('a set() called after a delete() of its key in the same tick wins, as it did when each delete went out at once', async () => {
    const [a, b] = [await cache(suite.client(), false), await cache(suite.client(), false)]
    await a.set('k', 'before')
    await Promise.all([a.delete('k'), a.set('k', 'after')])
    expect(await b.getOrLoad('k', async () => 'loaded: the set was deleted')).toBe('after')
  })
})
