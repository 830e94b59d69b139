import { InvalidArgumentError } from '../../errors.js'
import type { BackendShortcut } from '../resolve-backend.js'
import { RedisLockBackend } from './backend.js'
import { redisClaims } from './claims.js'

/** `createLocks({ redis })`: an ioredis client or Cluster the caller created. */
export const redisShortcut: BackendShortcut = {
  option: 'redis',
  create(value, settings) {
    if (!isRedisClient(value)) throw new InvalidArgumentError('redis', 'expected an ioredis client (Redis or Cluster)')
    // run-once claims (claims.ts) ride along on the same client
    return Object.assign(new RedisLockBackend(value, settings), { claims: redisClaims(value, settings) })
  },
}

export function isRedisClient(value: unknown): value is import('ioredis').Redis {
  return typeof value === 'object' && value !== null && typeof (value as { defineCommand?: unknown }).defineCommand === 'function' && typeof (value as { status?: unknown }).status === 'string'
}
