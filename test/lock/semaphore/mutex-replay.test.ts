/**
 * The mutex under the semaphore's reset attack: a connection reset after the acquire script
 * ran, before its reply arrived. ioredis resends the command on the new connection; the
 * second run must answer "yours" (the first run took it), not "busy": that left a lock
 * nobody owned for a whole lease, and a waiter with the same owner waited for itself.
 */
import { describe, expect, it } from 'vitest'
import { Redis } from 'ioredis'
import { createLocks } from '../../../src/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { startResetProxy } from './reset-proxy.js'

describe.skipIf(!redisAvailable)('Redis mutex: an acquire resent after a connection reset', () => {
  const redis = useRedisServer({ flush: true })

  for (const fair of [false, true]) {
    it(`fair ${fair}: the resent acquire gets the lock it took, and its release leaves nothing behind`, async () => {
      const proxy = await startResetProxy(redis.server().port)
      const client = new Redis({ host: '127.0.0.1', port: proxy.port })
      client.on('error', () => {})
      const locks = createLocks({ redis: client, namespace: 'replay', fair })
      try {
        await (await locks.acquire('warm', { wait: 0 })).release() // scripts loaded, connection probed
        proxy.armResetOnReply()
        const held = await locks.acquire('k', { wait: 0, lease: '20s' })
        expect(proxy.resets).toBe(1)
        expect(await redis.admin().get('replay:{l:k}:lock')).toMatch(new RegExp(`^[0-9a-f]{32}:${held.token}$`))
        await held.release()
        expect(await redis.admin().exists('replay:{l:k}:lock')).toBe(0) // no orphan for the 20 s lease
      } finally {
        await locks.close()
        client.disconnect()
        await proxy.close()
      }
    })
  }
})
