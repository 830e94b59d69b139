/**
 * One of the processes contending for a lock in the hand-off measurement (locks.ts):
 * on `run`, it loops acquire → hold → release → think until the deadline, and answers
 * every hold's [asked, acquired, release started] times (performance.timeOrigin + now:
 * one clock on one host). env COMPARE_REDIS_URL, COMPARE_DATABASE_URL.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { lockPeer } from './lock-peers.js'

export type ToContender = {
  type: 'run'
  lock: string
  key: string
  /** When to start and stop contending (absolute ms). */
  startMs: number
  untilMs: number
  holdMs: number
  thinkMs: number
}
export type FromContender =
  | { type: 'ready' }
  | {
      type: 'done'
      holds: [askedAt: number, acquiredAt: number, releasedAt: number][]
      failures: number
      firstError?: string
    }

const env = { redisUrl: process.env.COMPARE_REDIS_URL!, databaseUrl: process.env.COMPARE_DATABASE_URL! }
const now = () => performance.timeOrigin + performance.now()
const send = (message: FromContender) => process.send?.(message)

process.on('message', async (message: ToContender) => {
  const lock = await lockPeer(message.lock).create(env)
  const holds: [number, number, number][] = []
  let failures = 0
  let firstError: string | undefined
  await sleep(Math.max(0, message.startMs - now()))
  try {
    while (now() < message.untilMs) {
      try {
        const askedAt = now()
        const release = await lock.acquire(message.key, 10_000)
        const acquiredAt = now()
        await sleep(message.holdMs)
        holds.push([askedAt, acquiredAt, now()])
        await release()
      } catch (error) {
        failures++
        firstError ??= String((error as Error)?.message ?? error)
      }
      await sleep(message.thinkMs)
    }
  } finally {
    await lock.close()
  }
  send({ type: 'done', holds, failures, ...(firstError ? { firstError } : {}) })
})
process.once('disconnect', () => process.exit(0))
send({ type: 'ready' })
