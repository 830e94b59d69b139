/**
 * The baseline the wake-up benchmark compares against: the classic distributed lock
 * with polling, as found in many codebases.
 *
 *   loop: GET value → found: return it
 *         SET lock NX PX → won: load, SET value, DEL lock, return
 *         else sleep 100 ms and try again
 *
 * A waiter notices the new value only at its next poll, so it returns on average half a
 * poll interval (50 ms) after the value is stored, and up to a whole one (100 ms).
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'

export class SpinLockCache {
  constructor(
    private readonly redis: Redis,
    private readonly ttlMs: number,
    readonly pollMs = 100,
    private readonly leaseMs = 5_000,
    /** Polls before giving up with an error (the seed's retry limit); unlimited by default. */
    private readonly maxRetries = Infinity,
  ) {}

  async getOrLoad<T>(key: string, loader: () => Promise<T>): Promise<T> {
    const valueKey = `spin:${key}`
    const lockKey = `spin:${key}:lock`
    for (let attempt = 0; ; attempt++) {
      const cached = await this.redis.get(valueKey)
      if (cached !== null) return JSON.parse(cached) as T
      const token = randomBytes(8).toString('hex')
      if ((await this.redis.set(lockKey, token, 'PX', this.leaseMs, 'NX')) === 'OK') {
        try {
          const value = await loader()
          await this.redis.set(valueKey, JSON.stringify(value), 'PX', this.ttlMs)
          return value
        } finally {
          // Release only our own lock (compare-and-delete).
          await this.redis.eval(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
            1,
            lockKey,
            token,
          )
        }
      }
      if (attempt >= this.maxRetries) throw new Error(`spin lock on ${key}: still busy after ${attempt} retries`)
      await sleep(this.pollMs)
    }
  }
}
