import type { RedisClientLike } from '../../redis-client.js'
import type { BackendShortcut } from '../backend.js'
import { Notifier } from '../../redis/notifier.js'
import { ServerProbe } from '../../redis/server-probe.js'
import { redisCoalesce } from '../coalesce/redis.js'
import { redisElection } from '../election/redis.js'
import { redisReadWrite } from '../read-write/redis.js'
import { RedisLockBackend } from './backend.js'
import { redisClaims } from './claims.js'
import { parseRedisLockOption, type RedisLockOptions } from './options.js'

/** `createLocks({ redis })`: an ioredis client or Cluster the caller created, or `{ client, shardedPubSub, waitForReplicas }`. */
export const redisShortcut: BackendShortcut<RedisClientLike | RedisLockOptions> = {
  create(value, settings) {
    const { client, settings: redis } = parseRedisLockOption(value)
    // Run-once claims, elections and read-write locks ride along on the same client; the
    // last two share one subscriber connection, opened on first use and closed with the backend.
    const backend = new RedisLockBackend(client, settings, redis)
    const probe = new ServerProbe(client, redis.shardedPubSub, settings.commandTimeoutMs)
    const notifier = new Notifier(client, settings.commandTimeoutMs, probe)
    const close = backend.close.bind(backend)
    return Object.assign(backend, {
      claims: redisClaims(client, settings),
      coalesce: redisCoalesce(client, settings),
      election: redisElection(client, settings, redis, notifier, probe),
      readWrite: redisReadWrite(client, settings, notifier, probe),
      async close() {
        notifier.close()
        probe.close()
        await close()
      },
    })
  },
}
