/**
 * `assertHeld()` / `validForMs` against a real pause: a holder SIGSTOPped past its lease,
 * whose own work timer comes due before the watchdog's renewal, is resumed while another
 * process holds the lock. `signal.aborted` still reads false at the timer's first
 * instruction (timers run in expiry order after SIGCONT); `assertHeld()` throws there.
 * And `withLock` does not return a result computed past the lease.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { createLocks, LockLostError } from '../../../src/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'
import { forkWorker } from '../../support/workers.js'
import type { PauseReply, PauseRequest } from './pause-worker.js'

/** The process state letter from /proc (`T`: stopped). */
function stateOf(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '')[0]!
}

describe.skipIf(!redisAvailable)('assertHeld() after a real pause', () => {
  const redis = useRedisServer()

  it('SIGSTOPped past the lease: at the first instruction after SIGCONT, signal.aborted is still false but assertHeld() throws LockLostError', async () => {
    const worker = await forkWorker(new URL('./pause-worker.ts', import.meta.url), {
      env: { PAUSE_WORKER_PORT: String(redis.server().port) },
    })
    const locks = createLocks({ redis: redis.client(), namespace: 'pause' })
    try {
      // The work timer must come due before the watchdog's first timer: its renewal, at lease/3
      // aligned down by up to lease/12 (225 ms here), counted from when the acquire was sent.
      const request: PauseRequest = { key: 'job', lease: 900, workAt: 20 }
      const reply = worker.request<PauseReply>(request, 60_000)
      await until(() => stateOf(worker.pid) === 'T', 'the holder to stop itself', 30_000)
      // Another process gets the lock once the paused holder's lease ran out on the server.
      const other = await locks.acquire('job', { wait: '20s', lease: '5s' })
      worker.kill('SIGCONT')
      const seen = await reply
      await other.release()
      console.log(`[assert-held] after the pause: ${JSON.stringify(seen)}`)
      expect(seen.ranAfterMs).toBeGreaterThan(request.lease) // it really ran past its lease
      expect(seen.abortedAtWork).toBe(false) // the failure: the canonical check says "still held"
      expect(seen.validForMsAtWork).toBe(0)
      expect(seen.assertHeldThrew).toBe('LockLostError')
      expect(seen.abortedAfterAssert).toBe(true) // and signal agrees from then on
    } finally {
      await worker.stop()
      await locks.close()
    }
  }, 90_000)

  it('withLock rejects with LockLostError, not the result, when fn returns after the lease ran out; validForMs counts down', async () => {
    const locks = createLocks({ redis: redis.client(), namespace: 'pause-local' })
    const other = createLocks({ redis: redis.client(), namespace: 'pause-local' })
    try {
      let validAtStart = 0
      const call = locks.withLock(
        'k',
        async (lock) => {
          validAtStart = lock.validForMs
          await redis.admin().del('pause-local:{l:k}:lock') // taken from under it
          await other.acquire('k', { wait: 0 })
          // Blocks this event loop past the lease, as a pause would: no timer can run meanwhile.
          const until = performance.now() + 400
          while (performance.now() < until);
          return 'computed'
        },
        { lease: 300 },
      )
      await expect(call).rejects.toBeInstanceOf(LockLostError)
      // lease − margin (1 % + 2 ms) at most, counted from when the acquire was sent.
      expect(validAtStart).toBeGreaterThan(0)
      expect(validAtStart).toBeLessThanOrEqual(300 - 5)
      const held = await locks.acquire('k2', { lease: '2s' })
      const first = held.validForMs
      await sleep(50)
      expect(held.validForMs).toBeLessThan(first)
      held.assertHeld() // does not throw while held
      await held.release()
      expect(held.validForMs).toBe(0)
      expect(() => held.assertHeld()).toThrow(LockLostError)
    } finally {
      await locks.close()
      await other.close()
    }
  }, 30_000)
})
