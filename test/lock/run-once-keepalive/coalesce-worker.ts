/**
 * An app instance triggering one coalesced job (test/lock/run-once-keepalive/coalesce.test.ts).
 * env REDIS_URL. Each run checks it is alone (INCR of `co:inside` must answer 1), and
 * records its start; each trigger records when it was made (Date.now(): one host, one clock).
 */
import { Redis } from 'ioredis'
import { createLocks } from '../../../src/lock/index.js'
import { serveRequests } from '../../support/worker-side.js'

const redis = new Redis(process.env.REDIS_URL!)
const locks = createLocks({ redis, namespace: 'co' })

serveRequests(async (request: { op: 'trigger'; name: string; runMs: number }) => {
  await redis.rpush('co:triggers', Date.now())
  return locks.coalesce(request.name, async () => {
    if ((await redis.incr('co:inside')) !== 1) await redis.incr('co:overlaps')
    await redis.rpush('co:runs', Date.now())
    await new Promise((resolve) => setTimeout(resolve, request.runMs))
    await redis.decr('co:inside')
  })
})
