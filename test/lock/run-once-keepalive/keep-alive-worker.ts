/**
 * An instance that starts a runOnce job with keepAlive and never finishes it, to be
 * SIGKILLed mid-run (keep-alive-crash.test.ts). env REDIS_URL.
 */
import { Redis } from 'ioredis'
import { createLocks } from '../../../src/lock/index.js'
import { serveRequests } from '../../support/worker-side.js'

const locks = createLocks({ redis: new Redis(process.env.REDIS_URL!), namespace: 'keep-alive' })

serveRequests(async (request: { op: 'start'; name: string; atMost: number }) => {
  let started!: () => void
  const running = new Promise<void>((resolve) => (started = resolve))
  void locks.runOnce(
    request.name,
    async () => {
      started()
      await new Promise(() => {}) // runs until the process is killed
    },
    { lockAtMostFor: request.atMost, keepAlive: true },
  )
  await running
  return true
})
