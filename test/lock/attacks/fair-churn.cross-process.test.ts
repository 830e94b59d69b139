/**
 * The fair lock under churn across 4 real processes: every other withLock is aborted after
 * 0–8 ms, so waiters leave the line all the time, some as the lock is handed to them. Never
 * two holders at once, counted by the protected resource (a counter in Redis incremented
 * inside); every call ends (held or aborted); the line and the lock are empty after.
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { forkTwoAtATime } from '../semaphore/fork.js'
import type { ChurnReport, ChurnRequest } from './churn-worker.js'

describe.skipIf(!redisAvailable)('fair lock churn across processes', () => {
  let server: RedisServer
  let admin: Redis
  beforeAll(async () => {
    server = await startRedis()
    admin = server.client()
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('4 processes × 60 withLock, half aborted mid-wait: never two inside, every call ends, nothing left behind', async () => {
    const workers = await forkTwoAtATime(new URL('./churn-worker.ts', import.meta.url), 4, {
      CHURN_WORKER: JSON.stringify({ port: server.port }),
    })
    try {
      const request: ChurnRequest = { key: 'c', rounds: 60, lease: 2_000 }
      const reports = await Promise.all(workers.map((worker) => worker.request<ChurnReport>(request, 90_000)))
      const held = reports.reduce((sum, r) => sum + r.held, 0)
      const aborted = reports.reduce((sum, r) => sum + r.aborted, 0)
      expect(held + aborted).toBe(4 * 60)
      expect(held).toBeGreaterThanOrEqual(4 * 30) // the unaborted half all held it
      expect(Number(await admin.get('c:overlaps'))).toBe(0)
      expect(Number(await admin.get('c:inside'))).toBe(0)
      expect(await admin.zcard('churn:{l:c}:q')).toBe(0)
      expect(await admin.exists('churn:{l:c}:lock')).toBe(0)
      console.log(`[fair churn] 4 processes: ${held} held, ${aborted} aborted, 0 overlaps`)
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()))
    }
  }, 120_000)
})
