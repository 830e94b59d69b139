/**
 * A fair-lock user in its own process for test/lock/attacks/fair-churn.cross-process.test.ts:
 * `rounds` withLock calls on one key, every other one aborted after 0–8 ms (often while in
 * line, sometimes as the lock is handed to it). Inside, it counts holders in Redis (the
 * protected resource): `inside` while held, `overlaps` when it was not alone.
 * env CHURN_WORKER = JSON { port }.
 */
import { Redis } from 'ioredis'
import { createLocks } from '../../../src/index.js'
import { serveRequests } from '../../support/worker-side.js'

export interface ChurnRequest {
  key: string
  rounds: number
  lease: number
}
export interface ChurnReport {
  held: number
  aborted: number
}

const config = JSON.parse(process.env.CHURN_WORKER ?? '{}') as { port: number }
const redis = new Redis({ host: '127.0.0.1', port: config.port })
const locks = createLocks({
  redis: new Redis({ host: '127.0.0.1', port: config.port }),
  namespace: 'churn',
  fair: true,
})
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

serveRequests(async ({ key, rounds, lease }: ChurnRequest): Promise<ChurnReport> => {
  const report: ChurnReport = { held: 0, aborted: 0 }
  for (let i = 0; i < rounds; i++) {
    const controller = new AbortController()
    const timer = i % 2 === 1 ? setTimeout(() => controller.abort(), Math.floor(Math.random() * 9)) : undefined
    try {
      await locks.withLock(
        key,
        async () => {
          if ((await redis.incr(`${key}:inside`)) !== 1) await redis.incr(`${key}:overlaps`)
          await sleep(1 + (i % 3))
          await redis.decr(`${key}:inside`)
        },
        { lease, wait: 30_000, signal: controller.signal },
      )
      report.held++
    } catch (error) {
      if (!controller.signal.aborted) throw error
      report.aborted++
    } finally {
      clearTimeout(timer)
    }
  }
  return report
})
