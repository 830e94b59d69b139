/**
 * A read-lock holder in its own process (test/lock/read-write/redis.test.ts), to be
 * SIGKILLed while it holds. env REDIS_URL. Requests: { op: 'read', name, lease } holds a
 * read lock until the process dies.
 */
import { Redis } from 'ioredis'
import { createLocks } from '../../../src/lock/index.js'
import { serveRequests } from '../../support/worker-side.js'

const locks = createLocks({ redis: new Redis(process.env.REDIS_URL!), namespace: 'rw' })

serveRequests(async (request: { op: 'read'; name: string; lease: number }) => {
  const held = await locks.readWrite(request.name).acquireRead({ lease: request.lease, wait: 10_000 })
  return held.token.toString()
})
