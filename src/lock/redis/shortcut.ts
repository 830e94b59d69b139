import type { BackendShortcut } from '../resolve-backend.js'
import { redisElection } from '../election/redis.js'
import { RedisLockBackend } from './backend.js'
import { redisClaims } from './claims.js'
import { parseRedisLockOption } from './options.js'

/** `createLocks({ redis })`: an ioredis client or Cluster the caller created, or `{ client, shardedPubSub, waitForReplicas }`. */
export const redisShortcut: BackendShortcut = {
  option: 'redis',
  create(value, settings) {
    const { client, settings: redis } = parseRedisLockOption(value)
    // run-once claims (claims.ts) and elections ride along on the same client
    return Object.assign(new RedisLockBackend(client, settings, redis), {
      claims: redisClaims(client, settings),
      election: redisElection(client, settings, redis),
    })
  },
}
