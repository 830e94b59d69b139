import { InvalidArgumentError } from '../../errors.js'
import type { BackendShortcut } from '../resolve-backend.js'
import { RedisLockBackend } from './backend.js'

/** `createLocks({ redis })`: an ioredis client or Cluster the caller created. */
export const redisShortcut: BackendShortcut = {
  option: 'redis',
  create(value, settings) {
    if (!isRedisClient(value)) throw new InvalidArgumentError('redis', 'expected an ioredis client (Redis or Cluster)')
    return new RedisLockBackend(value, settings)
  },
}

export function isRedisClient(value: unknown): value is import('ioredis').Redis {
  return typeof value === 'object' && value !== null && typeof (value as { defineCommand?: unknown }).defineCommand === 'function' && typeof (value as { status?: unknown }).status === 'string'
}
