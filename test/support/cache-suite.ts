/**
 * The setup of a test file whose caches share one real redis-server: the server for the
 * file, an admin client on it, and `cache()` making a cache on its own connection (as
 * another process would have). After each test the caches are closed, their connections
 * dropped and Redis flushed. Call useCacheSuite() inside the file's describe.
 */
import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll } from 'vitest'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { startRedis, type RedisServer } from './redis.js'

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
  let server: RedisServer | undefined
  let admin: Redis | undefined
  const caches: Cache[] = []
  const clients: Redis[] = []

  beforeAll(async () => {
    server = await startRedis()
    admin = server.client()
  })
  afterAll(async () => {
    await server?.stop()
  })
  afterEach(async () => {
    await Promise.all(caches.splice(0).map((cache) => cache.close()))
    for (const client of clients.splice(0)) client.disconnect()
    await admin?.flushall()
  })

  const started = (): RedisServer => {
    if (!server) throw new Error('the redis-server has not started')
    return server
  }
  const client = (): Redis => {
    const redis = started().client()
    clients.push(redis)
    return redis
  }
  return {
    client,
    cache(options = {}) {
      const redis = client()
      const created = createCache({ redis, ttl: '30s', ...defaults, ...options })
      caches.push(created)
      return created
    },
    admin: () => {
      if (!admin) throw new Error('the redis-server has not started')
      return admin
    },
    server: started,
  }
}
