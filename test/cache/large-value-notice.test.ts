/**
 * A large value is not pushed through pub/sub: above 64 KiB a commit publishes a notice and
 * each waiting process reads the value once. Counted by subscribers on the key's channel:
 * the bytes each one receives per commit.
 */
import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { entryKeys } from '../../src/cache/redis/keys.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'
import { until } from '../support/timing.js'

const SUBSCRIBERS = 4

describe.skipIf(!redisAvailable)('large values by notice', () => {
  const caches: Cache[] = []
  const suite = useRedisServer({ cleanup: () => Promise.all(caches.splice(0).map((cache) => cache.close())) })

  /** SUBSCRIBERS connections on `key`'s channel, each counting the bytes of the messages it receives. */
  async function listeners(key: string): Promise<{ bytes: number[]; messages: Buffer[] }> {
    const channel = entryKeys('notice', key).channel
    const bytes = Array.from({ length: SUBSCRIBERS }, () => 0)
    const messages: Buffer[] = []
    await Promise.all(
      bytes.map(async (_, i) => {
        const subscriber: Redis = suite.client()
        subscriber.on('messageBuffer', (_channel: Buffer, message: Buffer) => {
          bytes[i] = (bytes[i] ?? 0) + message.length
          messages.push(message)
        })
        await subscriber.subscribe(channel)
      }),
    )
    return { bytes, messages }
  }

  it('a 1 MiB commit sends each of 4 subscribers a notice of under 1 KiB, and a 16 KiB one the value itself', async () => {
    const cache = createCache({ redis: suite.client(), ttl: '1m', l1: false, namespace: 'notice' })
    caches.push(cache)
    await cache.ready()
    const large = await listeners('large')
    const small = await listeners('small')
    const bigValue = 'x'.repeat(1024 * 1024)
    await cache.set('large', bigValue)
    await cache.set('small', 'y'.repeat(16 * 1024))
    await until(() => large.messages.length === SUBSCRIBERS && small.messages.length === SUBSCRIBERS, 'every message')
    for (const sent of large.bytes) expect(sent).toBeLessThanOrEqual(1024)
    expect(large.messages.every((message) => message.subarray(0, 2).toString() === 'n|')).toBe(true)
    for (const sent of small.bytes) expect(sent).toBeGreaterThan(16 * 1024)
    // What a waiter does on the notice: one read, which has the whole value.
    const reader = createCache({ redis: suite.client(), ttl: '1m', l1: false, namespace: 'notice' })
    caches.push(reader)
    expect(await reader.getOrLoad('large', async () => 'not loaded')).toBe(bigValue)
  }, 60_000)
})
