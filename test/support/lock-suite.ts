/**
 * The setup of a test file whose tests share one `Locks` on one real redis-server of its
 * own (useRedisServer): the factory is made on the admin client before the first test and
 * closed after the last, before the server stops. Call useRedisLocks() inside the file's
 * describe.
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll } from 'vitest'
import { createLocks, type Locks } from '../../src/index.js'
import type { RedisServer } from './redis.js'
import { useRedisServer } from './redis-suite.js'

export interface RedisLocksSuite {
  /** The file's one Locks, under `namespace`, on the admin client. */
  locks(): Locks
  /** The admin client the Locks runs on, for reading keys around it. */
  redis(): Redis
  server(): RedisServer
}

export function useRedisLocks(namespace: string): RedisLocksSuite {
  const suite = useRedisServer()
  let locks: Locks | undefined
  beforeAll(() => {
    locks = createLocks({ redis: suite.admin(), namespace })
  })
  // Registered after useRedisServer's: vitest runs after-hooks in reverse, so this closes first.
  afterAll(async () => {
    await locks?.close()
  })
  return {
    locks: () => {
      if (!locks) throw new Error('the Locks is made before the first test')
      return locks
    },
    redis: suite.admin,
    server: suite.server,
  }
}
