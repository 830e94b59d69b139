/**
 * The setup of the files that plant data in Redis behind the caches' backs (useRedisServer):
 * caches without L1 on one shared connection, ready before use, whose `corrupt`,
 * `redis-error` and `fenced` events are recorded; the server clock read through the admin
 * client. After each test the caches are closed, the records emptied and Redis flushed.
 */
import type { Redis } from 'ioredis'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { useRedisServer } from './redis-suite.js'

export interface PlantedSuite {
  /** A cache (l1: false, ttl 30 s) on the shared connection, awaited ready(). Closed after the test. */
  cache(options?: Partial<CacheOptions>): Promise<Cache>
  admin(): Redis
  /** Keys reported by `corrupt` events in this test (empty it with `corrupt.length = 0`). */
  readonly corrupt: string[]
  /** `redis-error` events in this test, as "operation: message". */
  readonly redisErrors: string[]
  /** How many `fenced` events this test saw. */
  fenced(): number
  /** The server's clock (TIME), in µs. */
  serverMicros(): Promise<bigint>
  /** The server's clock (TIME), in whole ms. */
  serverMs(): Promise<number>
}

/** The hash key of an entry in the default namespace. */
export const entry = (key: string): string => `sg:{k:${key}}`

export function usePlantedSuite(): PlantedSuite {
  const caches: Cache[] = []
  const corrupt: string[] = []
  const redisErrors: string[] = []
  let fenced = 0
  const redis = useRedisServer({
    flush: true,
    shared: true,
    cleanup: async () => {
      await Promise.all(caches.splice(0).map((cache) => cache.close()))
      corrupt.length = 0
      redisErrors.length = 0
      fenced = 0
    },
  })
  const serverMicros = async (): Promise<bigint> => {
    const [seconds, micros] = await redis.admin().time()
    return BigInt(seconds!) * 1_000_000n + BigInt(micros!)
  }
  return {
    async cache(options = {}) {
      const created = createCache({ redis: redis.shared(), ttl: '30s', l1: false, ...options })
      created.on('corrupt', ({ key }) => corrupt.push(key))
      created.on('redis-error', ({ operation, error }) =>
        redisErrors.push(`${operation}: ${(error as Error)?.message}`),
      )
      created.on('fenced', () => fenced++)
      caches.push(created)
      await created.ready()
      return created
    },
    admin: redis.admin,
    corrupt,
    redisErrors,
    fenced: () => fenced,
    serverMicros,
    serverMs: async () => Number((await serverMicros()) / 1000n),
  }
}
