import type { Cluster, Redis } from 'ioredis'
import type { BackendShortcut } from '../backend.js'
import { RedisLockBackend } from './backend.js'
import { redisClaims } from './claims.js'
import { parseRedisLockOption, type RedisLockOptions } from './options.js'

/** `createLocks({ redis })`: an ioredis client or Cluster the caller created, or `{ client, shardedPubSub, waitForReplicas }`. */
export const redisShortcut: BackendShortcut<Redis | Cluster | RedisLockOptions> = {
  create(value, settings) {
    const { client, settings: redis } = parseRedisLockOption(value)
    // run-once claims (claims.ts) ride along on the same client
    return Object.assign(new RedisLockBackend(client, settings, redis), { claims: redisClaims(client, settings) })
  },
}
