import type { RedisClientLike } from './redis-client.js'
import type { Duration } from './duration.js'
import type { BinaryCodec, Codec } from './codecs.js'
import type { CompressionOptions } from './compression.js'
import type { ReplicaWaitOption } from './redis/replicas.js'

export type { Duration }

/**
 * Early refresh keeps hot keys from ever missing: one process reloads an entry
 * shortly before it expires while everyone keeps getting the fresh value.
 * - a number in (0, 1): refresh once the entry is older than that fraction of its ttl (0.8 = in its last 20%);
 * - `'xfetch'`: probabilistic early expiration (Vattani et al.), refresh when
 *   `now − δ·β·ln(rand()) ≥ expiry`, δ being the last measured load time; β = 1;
 * - `{ beta }`: XFetch with another β (> 1 refreshes earlier);
 * - `false`: off (the default).
 */
export type EarlyRefresh = false | number | 'xfetch' | { beta: number }

/** Options that can be set on the cache and overridden per `getOrLoad` call. */
export interface PolicyOptions {
  /** How long a loaded value is fresh. Milliseconds or a string such as `'30s'`. Required on the cache. */
  ttl?: Duration
  /**
   * Grace (stale-while-revalidate): how long after `ttl` a stale value is still served
   * at once (no wait for the reload; with Redis, after one `GET` that finds no fresher copy),
   * to every caller in every process, while exactly one process refreshes it in the
   * background. Default `0` (off).
   */
  staleTtl?: Duration
  /**
   * Fail-safe window, counted from the end of `ttl`: while it lasts, a stale value is
   * kept as a fallback and served instead of a loader error, a `softTimeout` or a
   * `waitTimeout`. Default `0` (off).
   */
  staleIfError?: Duration
  /**
   * After a failed refresh that was covered by a stale value, no process retries the
   * loader for this long (the backoff is stored in Redis), and callers get the stale
   * value at once. Default `'5s'`.
   */
  failSafeBackoff?: Duration
  /**
   * With a stale value in hand, a loader slower than this answers the callers with the
   * stale value; the loader keeps running and fills the cache when it finishes.
   * Default `0` (off).
   */
  softTimeout?: Duration
  /**
   * Callers get a `LoaderTimeoutError` once the loader has run this long (and no stale
   * value covers it). The loader keeps running and may still fill the cache.
   * Default `0` (off).
   */
  hardTimeout?: Duration
  /**
   * How long a caller waits for another process that holds the lock (or for the in-process
   * flight it joined, not counting that flight's first Redis lookup). Afterwards it serves a
   * stale value if it has one, else follows `onWaitTimeout`. Default `'10s'`.
   */
  waitTimeout?: Duration
  /**
   * What a waiter does after `waitTimeout` with no stale value: `'load'` runs its own
   * loader (its result is still stored, fenced), `'throw'` rejects with
   * `LockWaitTimeoutError`. Default `'load'`. It never applies because of a budget: see
   * `maxWaits` and `maxPendingWaits`.
   */
  onWaitTimeout?: 'load' | 'throw'
  /** See {@link EarlyRefresh}. Default `false`. */
  earlyRefresh?: EarlyRefresh
  /**
   * Negative caching: after a load fails with no stale value to cover it, callers in
   * every process get that error (as `RemoteLoaderError`) for this long instead of each
   * retrying the database in turn. Needs Redis. Default `0` (off: the next call retries).
   */
  negativeTtl?: Duration
}

/** Options of one `getOrLoad` (or `set`) call: the policy overrides, plus the entry's tags. */
export interface CallOptions extends PolicyOptions {
  /**
   * Tags of the entry, for `deleteByTag` (see docs/tags.md); the loader can add more with
   * `ctx.tag()`. Up to 64 per entry, each a non-empty string of at most 1024 characters.
   * Each costs one small script when the value is stored, none on a hit. Default none.
   */
  tags?: readonly string[]
  /**
   * Reload even when a fresh value is cached (a webhook that knows the data changed): L1 and
   * Redis's fresh copy are skipped and the call takes the key's lock. Still one load at a
   * time across processes: a forced call that finds the key's lock held (another process, or
   * this one, loading or refreshing it) waits for that load's result instead of starting a
   * second one, even if that load began before the call. The new value replaces the old one
   * in every process's L1 (the invalidation broadcast). Default `false`.
   */
  forceRefresh?: boolean
}

/** Per-process L1 tier (lru-cache). */
export interface L1Options {
  /** Most entries kept per process. Default `10_000`. */
  max?: number
  /**
   * Most bytes kept per process, counted as the length of each value's encoded form (what
   * Redis stores; the decoded value in the heap is usually a small multiple of it). Least
   * recently used entries are evicted past it; a value larger than this alone is served
   * but never kept in L1. Default `64 * 1024 * 1024` (64 MiB).
   */
  maxBytes?: number
  /**
   * Upper bound on how long an entry stays in L1 (fresh, in grace, or as a fail-safe
   * fallback), whatever its ttl. Defence in depth for invalidations: pub/sub is
   * at-most-once, and a process that missed a `delete()`'s broadcast serves the old value
   * for at most this long (a lost subscriber connection is handled on its own: L1 is
   * checked with Redis). The cost: a key hot in L1 is re-read from Redis (one GET) this
   * often, and during a Redis outage L1 keeps a fail-safe fallback only this long.
   * `Infinity` turns the bound off. Default `'1m'`.
   */
  maxTtl?: Duration
}

/** The Redis lock that elects one loader per key. */
export interface LockOptions {
  /** Lock lease; renewed every lease/3 while the loader runs. A crashed leader blocks others at most this long. Default `'5s'`. */
  lease?: Duration
  /**
   * The longest a load may run. Then the lock is given up, the loader's AbortSignal fires,
   * and callers get a `LoaderTimeoutError` (or a stale value); a result after that is never
   * stored. Also bounds `close()`. At least `lease`. Default `'60s'`.
   */
  maxHold?: Duration
  /** First safety poll while waiting (pub/sub normally wakes waiters first); doubles with jitter. Default `'50ms'`. */
  pollInterval?: Duration
  /** Cap on the safety poll interval. Default `'1s'`. */
  maxPollInterval?: Duration
  /**
   * Budget of safety polls, in poll COMMANDS per second (calls of `poll-locks.lua`, each
   * asking about up to 500 locks; per slot on a Cluster), for all of this cache's waits
   * together: they share one scheduler. Each wait's key is polled at most every
   * `maxPollInterval` (every 250 ms past `maxWaits`), so 20,000 waits past `maxWaits` cost
   * about 80,000 keys in ~160 calls a second; past the budget each key is polled
   * less often, never Redis more. Pub/sub still wakes waiters first. Default `1000` calls/s.
   * (Before it counted keys a second: a value set for that is now a looser bound.)
   */
  maxPollRate?: number
  /**
   * Durability of the lock across a failover (Redisson's approach): each lookup that may take
   * the lock is followed, in the same round trip, by `WAIT replicas timeout`. A lock that fewer
   * replicas acknowledged is still used (the fence keeps the stored value right; a lock lost in
   * a failover costs one duplicate load) and reported as a `lock-unreplicated` event.
   * Costs up to `timeout` per lookup when replicas lag, and the full `timeout` on every lookup
   * when there are fewer replicas than asked. `replicas` defaults to 1, `timeout` to `'50ms'`.
   * Default `false` (off).
   */
  waitForReplicas?: ReplicaWaitOption
}

/** Keeps the cache answering when Redis is down: after `threshold` consecutive failures Redis is skipped for `openFor`. */
export interface CircuitBreakerOptions {
  /** Consecutive Redis failures that open the breaker. Default `3`. */
  threshold?: number
  /** How long the breaker stays open before one probe command may try Redis again. Default `'2s'`. */
  openFor?: Duration
}

/** The budget of Redis commands one cache has in flight (see `docs/limits.md`). */
export interface RedisCommandOptions {
  /**
   * Most commands sent and not yet answered. More wait in the cache's own queue, and each
   * command's `redisTimeout` starts only when it is sent. A fresh-copy read counts as one
   * command even when it shares an MGET with others: the bound is on keys in flight. Default `256`.
   */
  maxInFlight?: number
  /** Most commands waiting for a slot; past it a command fails at once (the call carries on without Redis). Default `50_000`. */
  maxQueued?: number
}

export interface CacheOptions extends PolicyOptions {
  /** An ioredis client. Without it the cache runs in-process: L1 plus single-flight. The cache never closes it. */
  redis?: RedisClientLike
  /** Prefix of every Redis key and channel. Default `'sg'`. */
  namespace?: string
  /** L1 settings, or `false` to read Redis on every call. Default `{ max: 10_000, maxBytes: 64 MiB }`. */
  l1?: L1Options | false
  lock?: LockOptions
  /**
   * Timeout for each Redis command stampede-guard sends, whatever the client's own settings,
   * counted from when the command is sent (not while it waits for a `redisCommands` slot).
   * Default `'1s'`.
   */
  redisTimeout?: Duration
  /**
   * On a client that can fail over (an ioredis `Cluster`, or a `Redis` with `sentinels`): while
   * Redis has been failing for less than this, a call retries it (every `lock.pollInterval`,
   * within its `waitTimeout`) instead of loading without Redis, so a failover costs at most one
   * load per key instead of one per process. Past it, Redis is treated as down, as on a
   * standalone client; on a Cluster this is judged per master (one shard's failover is no
   * outage of the others). A call waiting for another process's load (the lock was seen held)
   * retries until its `waitTimeout` instead. Set it above your failover time
   * (cluster-node-timeout or Sentinel's down-after-milliseconds, plus ~1 s); `0` turns it
   * off. Default `'5s'`.
   */
  redisFailoverWait?: Duration
  redisCommands?: RedisCommandOptions
  /**
   * Largest encoded value stored, in bytes (UTF-8). A larger one is returned to its callers,
   * not stored, with an `uncacheable` event; `set()` rejects it. Default `32 MiB`
   * (33_554_432). A value above 64 KiB never travels through pub/sub (its commit message is a
   * notice, and each waiting process reads it once), so pub/sub's output-buffer limit does not
   * bind it; what does is the memory of Redis and of each process that holds it.
   */
  maxValueBytes?: number
  /**
   * Most background refreshes (grace and early refresh) one cache runs at once. Past it a
   * refresh is skipped: the value in hand is still served, and a later read tries again.
   * Default `64`.
   */
  maxBackgroundRefreshes?: number
  /**
   * Most cross-process waits one cache keeps subscribed at once: keys whose lock another
   * process holds and that this one waits on (each holds one subscription and a place in the
   * poll scheduler; a process in grace watching another's reload counts too). Past it a wait
   * still waits, but does not subscribe: it is answered by the shared poll alone (within
   * `lock.maxPollRate`, backed off 50 ms → 250 ms: about a quarter second after the holder's
   * commit), and a `wait-capped` event is emitted. A
   * budget never makes a caller run its own loader. Default `1000`.
   */
  maxWaits?: number
  /**
   * Hard ceiling on the cross-process waits of one cache, subscribed or polled (each costs
   * memory while it waits). Past it a call does not wait: it is served a stale value if it has
   * one, else rejects with `LockWaitTimeoutError` (never its own loader, whatever
   * `onWaitTimeout` says: loading there would send the burst to the database). Default `100000`.
   */
  maxPendingWaits?: number
  /**
   * Each stored ttl is shortened by a random fraction up to this, so keys loaded together
   * do not all expire (and refresh) together. `0` turns it off. Default `0.05` (up to 5%).
   */
  ttlJitter?: number
  circuitBreaker?: CircuitBreakerOptions
  /**
   * Encodes values for Redis. Default `jsonCodec`: JSON that also keeps `Date`, `BigInt`,
   * `Map`, `Set`, `NaN`, `±Infinity` and `undefined` in arrays; `null` is a value. Refused
   * (returned to the caller, not stored, an `uncacheable` event and one process warning per
   * reason): class instances, typed arrays, `RegExp`, functions, cycles, and a top-level
   * `undefined`. `superjsonCodec(superjson)` stores more; `msgpackCodec()` stores
   * MessagePack bytes (a `BinaryCodec`). See docs/codecs.md.
   */
  codec?: Codec | BinaryCodec
  /**
   * Compress encoded values of at least `minBytes` (default 16 KiB) with node:zlib: less Redis
   * memory and fewer bytes on the wire for large values, for some CPU on every write and
   * every read (see docs/codecs.md for measurements). `true` is `{}`: brotli, quality 4.
   * Compressed values are marked, so every process reads them whatever its own setting
   * (a version without this option reads them as corrupt: turn it on once every process
   * runs one that has it). `maxValueBytes` bounds the value before compression, and so what
   * any process inflates. Default off.
   */
  compression?: boolean | CompressionOptions
  /** Longest accepted key, in UTF-16 code units. Default `1024`. */
  maxKeyLength?: number
  /**
   * Wake waiters with sharded pub/sub (SPUBLISH/SSUBSCRIBE): a notification then travels only
   * within its key's shard, where classic PUBLISH is relayed to every node of a cluster.
   * `'auto'` reads the server version once in the background: sharded on a Redis ≥ 7
   * Cluster, classic on Redis 6.2 and on a standalone or Sentinel client. `true` needs an
   * ioredis `Cluster` on Redis ≥ 7. Every process sharing a cluster must end up with the same
   * choice, or waiters miss each other's messages and wake by polling. Default `'auto'`.
   */
  shardedPubSub?: boolean | 'auto'
  /**
   * Budget of keys per tag: a tag lists at most this many entries between two invalidations
   * of it (the list expires with its longest-lived entry). A value tagged with a full tag is
   * returned to its callers, not stored, with an `uncacheable` event. Default `10_000`.
   */
  maxKeysPerTag?: number
  /**
   * How far apart the clocks of Redis Cluster masters may be. A load is told that a tag was
   * invalidated after it began by comparing two server times, which on a Cluster come from
   * two masters (the tag's and the key's): a value whose load began less than this after an
   * invalidation of one of its tags is not stored (its callers still get it, the next call
   * loads again). Default `'20ms'` on an ioredis `Cluster`, `0` otherwise (one clock).
   */
  tagClockSkew?: Duration
  /**
   * A fleet-wide cap on loader runs, for a fragile database behind the cache: across every
   * process sharing this Redis and `namespace`, at most `limit` loaders run at once (a
   * counting semaphore in Redis, its permits leased for `lock.lease` and renewed while the
   * loader runs, behind a per-process semaphore of `limit`, so at most `limit` loads per
   * process stand in the Redis line). A load past the cap waits in FIFO order for up to its
   * callers' `waitTimeout`; then its callers get a stale value if they have one, else
   * `LoaderConcurrencyError`. It never runs its loader without a permit because of the cap
   * (that is the stampede the cap is for). A permit command that times out (`redisTimeout`)
   * is sent again within the wait: a slow Redis does not lift the cap. Only when Redis is
   * unavailable (connection down, circuit breaker open) does a load run on its per-process
   * permit alone (a `redis-error` event): at most `limit` per process then. Needs Redis.
   * Default `false` (off).
   */
  loaderConcurrency?: LoaderConcurrencyOptions | false
  /**
   * Deletes that survive a Redis outage (docs/durable-deletes.md): a `delete()` that cannot
   * reach Redis is queued in a bounded outbox and replayed, fenced, once Redis answers.
   * `{ default: 'queue' }` makes every `delete()` durable; `{ durable: 'queue' }` per call
   * does it for one. Default: off (`delete()` rejects with `RedisUnavailableError`).
   */
  durableDeletes?: DurableDeleteOptions
  /**
   * Lets `cache.clear()` empty the cache's own keys too, not only its namespaces
   * (docs/namespaces.md). The cache's keys and tags are then stored under the cache-wide
   * generation, as `\0ns\0\0<generation>\0<key>` (in Redis, in L1 and in the keys that
   * events name), so one `clear()` makes every entry of the cache unreachable in every process,
   * with one command, with a namespace clear's guarantees. It costs what a namespace costs: the
   * generation is read once (one GET) before the first call is answered and again after the
   * subscriber connection was lost, and `maxKeyLength` counts the prefix (14 characters at most).
   * Turning it on or off changes every key name: entries stored under the other setting are
   * not found (every process sharing this Redis and `namespace` must use the same setting).
   * Default `false`: the cache's own keys are stored as given and `clear()` leaves them.
   */
  clearable?: boolean
}

/** See {@link CacheOptions.loaderConcurrency}. */
export interface LoaderConcurrencyOptions {
  /** Most loaders running at once across every process sharing the store. An integer in 1..10,000. Required. */
  limit: number
  /**
   * Most loads one cache keeps waiting for a permit; past it a load does not wait (stale, else
   * `LoaderConcurrencyError`). Waiting loads wait in this process (a closure and a timer
   * each); at most `limit` of them stand in the Redis line at once. Default `10_000`.
   */
  maxQueued?: number
}

/** See {@link CacheOptions.durableDeletes} and docs/durable-deletes.md. */
export interface DurableDeleteOptions {
  /**
   * What a `delete()` without its own `durable` option does when Redis cannot be reached:
   * `'queue'` queues it in the outbox (it resolves `'queued'`), `false` rejects with
   * `RedisUnavailableError`. Default `false`.
   */
  default?: 'queue' | false
  /**
   * Most deletes the outbox holds, one per key (a key deleted again while queued keeps one
   * entry, the latest). Past it a durable delete of a key not yet queued rejects with
   * `RedisUnavailableError` and emits `delete-dropped` (reason `'outbox-full'`): the oldest
   * deletes are never dropped to make room. An integer in 1..1,000,000. Default `10_000`.
   */
  maxQueued?: number
  /**
   * How often the outbox tries Redis again while it holds deletes (besides at once when the
   * client reconnects). Milliseconds or a string such as `'1s'`. Default `'1s'`.
   */
  retryInterval?: Duration
}

/** `delete()`'s options. */
export interface DeleteOptions {
  /**
   * `'queue'`: when Redis cannot be reached, queue the delete in the outbox and resolve
   * `'queued'` (replayed, fenced, once Redis answers); `false`: reject with
   * `RedisUnavailableError`. Default: the cache's `durableDeletes.default` (`false`).
   */
  durable?: 'queue' | false
}
