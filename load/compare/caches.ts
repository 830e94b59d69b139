/**
 * The caches `npm run compare` puts side by side, each behind one small adapter and each
 * configured as its own documentation recommends for stampede protection. The stampede
 * macro-benchmark runs them inside the load-test app's workers (app-loader.ts), the
 * hit-path micro-benchmark in this process (micro.ts): the same adapter in both.
 *
 * The contract, wherever a cache supports it: fresh for `ttlMs`, then stale for `staleMs`
 * (served while one refresh runs, and when the refresh fails). Every Redis client is the
 * comparison's own ioredis 5 (bentocache's bus accepts nothing newer), ours included.
 */
import { BentoCache, bentostore } from 'bentocache'
import { memoryDriver } from 'bentocache/drivers/memory'
import { redisBusDriver, redisDriver } from 'bentocache/drivers/redis'
import { createCache as createDedupeCache } from 'async-cache-dedupe'
import { createCache as createCacheManager } from 'cache-manager'
import { Keyv } from 'keyv'
import KeyvRedis from '@keyv/redis'
import { LRUCache } from 'lru-cache'
import { Redis, type RedisOptions } from 'ioredis'
import { createCache, NaiveCache, SpinLockCache, type CacheOptions } from './from-load.js'

export interface CacheContext {
  redisUrl: string
  /** Prefix of every key this instance writes (runs never see each other's entries). */
  namespace: string
  ttlMs: number
  /** The stale window after the ttl. */
  staleMs: number
  /** In-process entries (L1) a cache with one may keep; 0 = no L1 (the micro-benchmark's L2-only instance). */
  l1Max: number
}

/** One cache, reading through to `load` on a miss. */
export interface PeerCache {
  get(key: string): Promise<unknown>
  close(): Promise<void>
}

export interface CachePeer {
  name: string
  /** The configuration, in one line (the tables and docs/comparison.md). */
  config: string
  /** The package whose version the results record ('' = this repository). */
  package: string
  /** Whether it keeps a copy in the process (the micro-benchmark's L1 row). */
  hasL1: boolean
  /** Whether it stores in Redis (the micro-benchmark's L2 rows). */
  hasL2: boolean
  create(context: CacheContext, load: (key: string) => Promise<unknown>): Promise<PeerCache>
}

/** A client for one cache: errors are outcomes (served or not), never a crash. */
const client = (url: string, options: RedisOptions = {}) => new Redis(url, options).on('error', () => {})

const seconds = (ms: number) => Math.max(1, Math.round(ms / 1000))

export const CACHE_PEERS: CachePeer[] = [
  {
    name: 'stampede-guard',
    package: '',
    config:
      "createCache({ redis, ttl, staleTtl: stale, staleIfError: stale, earlyRefresh: 'xfetch', l1: { max } }), getOrLoad",
    hasL1: true,
    hasL2: true,
    async create(c, load) {
      const redis = client(c.redisUrl)
      const cache = createCache({
        // The comparison's ioredis 5, as for every peer (ours accepts ^5.4 || ^6).
        redis: redis as unknown as CacheOptions['redis'],
        namespace: c.namespace,
        ttl: c.ttlMs,
        staleTtl: c.staleMs,
        staleIfError: c.staleMs,
        earlyRefresh: 'xfetch',
        l1: c.l1Max > 0 ? { max: c.l1Max } : false,
      })
      return {
        get: (key) => cache.getOrLoad(key, () => load(key)),
        async close() {
          await cache.close()
          redis.disconnect()
        },
      }
    },
  },
  {
    name: 'bentocache',
    package: 'bentocache',
    config:
      'BentoCache multi-tier: memoryDriver L1 + redisDriver L2 + redisBusDriver; getOrSet({ ttl, grace: stale }) (soft timeout 0: a graced value is served while the factory runs)',
    hasL1: true,
    hasL2: true,
    async create(c, load) {
      const connection = client(c.redisUrl)
      const url = new URL(c.redisUrl)
      let store = bentostore()
      // The bus keeps the processes' L1s coherent; without an L1 there is nothing to tell.
      if (c.l1Max > 0)
        store = store
          .useL1Layer(memoryDriver({ maxItems: c.l1Max }))
          .useBus(redisBusDriver({ connection: { host: url.hostname, port: Number(url.port) } }))
      const bento = new BentoCache({
        default: 'cache',
        prefix: c.namespace,
        ttl: c.ttlMs,
        grace: c.staleMs,
        stores: { cache: store.useL2Layer(redisDriver({ connection })) },
      })
      return {
        get: (key) => bento.getOrSet({ key, factory: () => load(key), ttl: c.ttlMs, grace: c.staleMs }),
        async close() {
          await bento.disconnectAll()
          connection.disconnect()
        },
      }
    },
  },
  {
    name: 'async-cache-dedupe',
    package: 'async-cache-dedupe',
    config:
      "createCache({ ttl, stale, storage: { type: 'redis', options: { client } } }), define('item', load): in-process dedupe, Redis storage (whole seconds)",
    hasL1: false,
    hasL2: true,
    async create(c, load) {
      const redis = client(c.redisUrl, { keyPrefix: `${c.namespace}:` })
      const cache = createDedupeCache({
        ttl: seconds(c.ttlMs),
        stale: seconds(c.staleMs),
        storage: { type: 'redis', options: { client: redis } },
      }).define('item', (key: string) => load(key))
      return {
        get: (key) => cache.item(key),
        async close() {
          redis.disconnect()
        },
      }
    },
  },
  {
    name: 'cache-manager',
    package: 'cache-manager',
    config:
      'createCache({ stores: [new Keyv({ store: new KeyvRedis(url) })], ttl: ttl + stale, refreshThreshold: stale }), wrap (in-process coalescing)',
    hasL1: false,
    hasL2: true,
    async create(c, load) {
      const store = new KeyvRedis(c.redisUrl)
      const cache = createCacheManager({
        stores: [new Keyv({ store, namespace: c.namespace })],
        ttl: c.ttlMs + c.staleMs,
        refreshThreshold: c.staleMs,
      })
      return {
        get: (key) => cache.wrap(key, () => load(key)),
        async close() {
          await cache.disconnect()
        },
      }
    },
  },
  {
    name: 'lru-cache',
    package: 'lru-cache',
    config:
      'new LRUCache({ max, ttl, allowStale, noDeleteOnFetchRejection, allowStaleOnFetchRejection, fetchMethod }), fetch: per process, no Redis',
    hasL1: true,
    hasL2: false,
    async create(c, load) {
      const lru = new LRUCache<string, object>({
        max: c.l1Max,
        ttl: c.ttlMs,
        allowStale: true,
        noDeleteOnFetchRejection: true,
        allowStaleOnFetchRejection: true,
        fetchMethod: async (key) => (await load(key)) as object,
      })
      return { get: (key) => lru.fetch(key), close: async () => lru.clear() }
    },
  },
  {
    name: 'spin lock',
    package: '',
    config:
      'the seed: GET; else SET lock NX PX 5 s + token, load, SET PX ttl, Lua compare-and-delete; else sleep 100 ms, ≤ 50 retries',
    hasL1: false,
    hasL2: true,
    async create(c, load) {
      const redis = client(c.redisUrl)
      const spin = new SpinLockCache(redis as never, c.ttlMs, 100, 5_000, 50)
      return {
        get: (key) => spin.getOrLoad(`${c.namespace}:${key}`, () => load(key)),
        close: async () => redis.disconnect(),
      }
    },
  },
  {
    name: 'naive',
    package: '',
    config: 'GET; on a miss load and SET PX ttl; no lock, no stale',
    hasL1: false,
    hasL2: true,
    async create(c, load) {
      // Fails fast when Redis is down, as a hand-written cache would.
      const redis = client(c.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 1000 })
      const naive = new NaiveCache(redis as never, c.namespace, c.ttlMs)
      return { get: (key) => naive.getOrLoad(key, () => load(key)), close: async () => redis.disconnect() }
    },
  },
  {
    name: 'none',
    package: '',
    config: 'no cache: every request queries the database',
    hasL1: false,
    hasL2: false,
    async create(_c, load) {
      return { get: load, close: async () => {} }
    },
  },
]

export const CACHE_PEER_NAMES = CACHE_PEERS.map((peer) => peer.name)

export function cachePeer(name: string): CachePeer {
  const peer = CACHE_PEERS.find((p) => p.name === name)
  if (!peer) throw new Error(`unknown cache peer '${name}' (expected one of: ${CACHE_PEER_NAMES.join(', ')})`)
  return peer
}
