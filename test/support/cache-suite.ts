/**
 * The setup of a test file whose caches share one real redis-server (useRedisServer): the
 * server for the file, an admin client on it, and `cache()` making a cache on its own
 * connection (as another process would have). After each test the caches are closed, their
 * connections dropped and Redis flushed. Call useCacheSuite() inside the file's describe.
 */
import type { Redis } from 'ioredis'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import type { RedisServer } from './redis.js'
import { useRedisServer } from './redis-suite.js'

export interface CacheSuite {
  /** A cache on a connection of its own, with `defaults` under `options`. Closed after the test. */
  cache(options?: Partial<CacheOptions>): Cache
  /** Another client on the server, disconnected after the test. */
  client(): Redis
  /** An admin client, for reading and setting keys around the caches. */
  admin(): Redis
  server(): RedisServer
}

export function useCacheSuite(defaults: Partial<CacheOptions> = {}): CacheSuite {
  const caches: Cache[] = []
  const redis = useRedisServer({
    flush: true,
    cleanup: () => Promise.all(caches.splice(0).map((cache) => cache.close())),
  })
  return {
    client: () => redis.client(),
    cache(options = {}) {
      const created = createCache({ redis: redis.client(), ttl: '30s', ...defaults, ...options })
      caches.push(created)
      return created
    },
    admin: redis.admin,
    server: redis.server,
  }
}
