/**
 * Compression inside one process with Redis: what L1 counts of a compressed value, and that
 * in-process mode never compresses (it keeps values, not their stored form).
 */
import { describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'

describe.skipIf(!redisAvailable)('compression and L1', () => {
  const suite = useRedisServer({ shared: true })

  it('l1.maxBytes counts a value before compression: 50 KB that brotli makes 30 bytes is not kept in a 10 KB L1', async () => {
    // Failed before storedSize(): L1 counted the compressed length and kept it (hit tier 'l1').
    const cache = createCache({
      redis: suite.shared(),
      ttl: '30s',
      namespace: `l1-compressed-${process.pid}`,
      compression: { minBytes: 0 },
      l1: { maxBytes: 10_000 },
    })
    const tiers: string[] = []
    cache.on('hit', ({ tier }) => tiers.push(tier))
    try {
      let loads = 0
      const load = async () => (loads++, 'x'.repeat(50_000))
      expect(await cache.getOrLoad('big', load)).toHaveLength(50_000)
      expect(await cache.getOrLoad('big', load)).toHaveLength(50_000)
      expect(loads).toBe(1)
      expect(tiers).toEqual(['redis'])
      const data = (await suite.shared().getBuffer(`l1-compressed-${process.pid}:{k:big}:v`))!
      expect(data.includes(Buffer.from('\0sgzb', 'latin1'))).toBe(true)
      expect(data.length).toBeLessThan(200)
      // A small value is kept: L1 answers the second call.
      await cache.getOrLoad('small', async () => 'y'.repeat(100))
      await cache.getOrLoad('small', async () => 'y'.repeat(100))
      expect(tiers).toEqual(['redis', 'l1'])
    } finally {
      await cache.close()
    }
  })
})
