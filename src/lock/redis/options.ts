import type { Cluster, Redis } from 'ioredis'
import { InvalidArgumentError } from '../../errors.js'
import type { RedisClientLike } from '../../redis-client.js'
import { positiveInteger } from '../../counts.js'
import { parseReplicaWait, type ReplicaWait, type ReplicaWaitOption } from '../../redis/replicas.js'
import { parseShardedPubSub } from '../../redis/server-probe.js'
import { DEFAULT_MAX_POLL_RATE } from '../../redis/poll-scheduler.js'
import { DEFAULT_MAX_SUBSCRIBED_WAITS } from './subscribed-waits.js'

/**
 * `createLocks({ redis: { client, shardedPubSub, waitForReplicas, maxPollRate, maxSubscribedWaits } })`;
 * `createLocks({ redis: client })` takes every default.
 */
export interface RedisLockOptions {
  /** An ioredis client: standalone, Sentinel (`new Redis({ sentinels, name })`) or Cluster. */
  client: RedisClientLike
  /**
   * Wake waiters with sharded pub/sub: the release script SPUBLISHes on the lock's channel
   * (declared as a key, in the lock's slot) and waiters SSUBSCRIBE, so a release travels
   * only within its shard instead of over the whole cluster bus. `'auto'` reads the server
   * version once: sharded on a Redis ≥ 7 Cluster, classic on Redis 6.2 and on a standalone
   * or Sentinel client. `true` needs a Cluster. Default `'auto'`, as for the cache.
   */
  shardedPubSub?: boolean | 'auto'
  /**
   * Durability of the lock across a failover (Redisson's approach), strict: each acquire
   * script is followed, in the same round trip, by `WAIT replicas timeout`; a lock that
   * fewer replicas acknowledged is released at once and counts as not acquired (the wait
   * goes on; when it runs out, `LockBusyError`). Costs one replication round trip per
   * acquisition, and up to `timeout` per attempt while replicas lag or are missing. WAIT is
   * not consensus: see docs/locks.md. `replicas` defaults to 1, `timeout` to `'50ms'`.
   * Default `false` (off).
   */
  waitForReplicas?: ReplicaWaitOption
  /**
   * Budget of safety polls while waiting, in poll COMMANDS per second (calls of
   * `poll-locks.lua`, each asking about up to 500 locks; per slot on a Cluster), for all of
   * this backend's waits together: one scheduler asks Redis about the locks whose poll came
   * due in shared calls; each wait's own backoff bounds how often its key is polled, and past
   * the budget each key is polled less often, never Redis more. Release messages still wake
   * waiters first. Default `1000` calls/s.
   */
  maxPollRate?: number
  /**
   * Budget of pub/sub subscriptions, in waits, for all of this backend's waits together (each
   * waiting key holds one channel subscription on the subscriber connection). A wait past it
   * does not subscribe and is not refused: it is woken by the shared poll alone (within
   * `maxPollRate`), backed off 50 ms → 250 ms, so it sees a release up to about a quarter
   * second late, and still gives up at its deadline. A slot freed meanwhile goes to the next
   * wait to start. Default `1000`.
   */
  maxSubscribedWaits?: number
}

export interface RedisLockSettings {
  shardedPubSub: boolean | 'auto'
  replicaWait: ReplicaWait | undefined
  maxPollRate: number
  maxSubscribedWaits: number
}

const KEYS = new Set(['client', 'shardedPubSub', 'waitForReplicas', 'maxPollRate', 'maxSubscribedWaits'])

/** @internal Names ioredis's types: kept out of the published `.d.ts`. */
export function isRedisClient(value: unknown): value is Redis {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { defineCommand?: unknown }).defineCommand === 'function' &&
    typeof (value as { status?: unknown }).status === 'string'
  )
}

/** @internal The `redis` option, as a client or as `{ client, … }`, validated with the option named. */
export function parseRedisLockOption(value: unknown): { client: Redis | Cluster; settings: RedisLockSettings } {
  if (isRedisClient(value)) {
    return {
      client: value,
      settings: {
        shardedPubSub: parseShardedPubSub('redis.shardedPubSub', undefined, value),
        replicaWait: undefined,
        maxPollRate: DEFAULT_MAX_POLL_RATE,
        maxSubscribedWaits: DEFAULT_MAX_SUBSCRIBED_WAITS,
      },
    }
  }
  if (typeof value !== 'object' || value === null || !isRedisClient((value as RedisLockOptions).client)) {
    throw new InvalidArgumentError(
      'redis',
      'expected an ioredis client (Redis or Cluster), or { client, shardedPubSub, waitForReplicas, maxPollRate, maxSubscribedWaits }',
    )
  }
  for (const name of Object.keys(value)) {
    if (!KEYS.has(name))
      throw new InvalidArgumentError(`redis.${name}`, `unknown option (known: ${[...KEYS].join(', ')})`)
  }
  const options = value as RedisLockOptions
  return {
    client: options.client as Redis | Cluster,
    settings: {
      shardedPubSub: parseShardedPubSub('redis.shardedPubSub', options.shardedPubSub, options.client),
      replicaWait: parseReplicaWait('redis.waitForReplicas', options.waitForReplicas),
      maxPollRate: positiveInteger('redis.maxPollRate', options.maxPollRate ?? DEFAULT_MAX_POLL_RATE),
      maxSubscribedWaits: positiveInteger(
        'redis.maxSubscribedWaits',
        options.maxSubscribedWaits ?? DEFAULT_MAX_SUBSCRIBED_WAITS,
      ),
    },
  }
}
