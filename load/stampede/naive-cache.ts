/**
 * The `naive` baseline: the read-through cache most applications start with.
 *
 *   GET key → hit: return it
 *          → miss: load from the database, SET key value PX ttl, return it
 *
 * No lock, no single-flight: every request that misses while the first load is still
 * running loads too. That is the cache stampede stampede-guard exists to stop, and this
 * file is here only so the load test can show it side by side.
 */
import type { Redis } from 'ioredis'

export class NaiveCache {
  constructor(
    private readonly redis: Redis,
    private readonly namespace: string,
    private readonly ttlMs: number,
  ) {}

  async getOrLoad<T>(key: string, loader: () => Promise<T>): Promise<T> {
    const redisKey = `${this.namespace}:naive:${key}`
    let cached: string | null = null
    try {
      cached = await this.redis.get(redisKey)
    } catch {
      // Redis down: treat as a miss, as most hand-written caches do.
    }
    if (cached !== null) return JSON.parse(cached) as T
    const value = await loader()
    try {
      await this.redis.set(redisKey, JSON.stringify(value), 'PX', this.ttlMs)
    } catch {
      // Could not store: the next request loads again.
    }
    return value
  }
}
