/**
 * A holder that pauses itself past its lease (the failure, reproduced for real):
 * it takes the lock, arms its own work timer, and SIGSTOPs itself. The test resumes it
 * once another process holds the lock. The work timer is due before the watchdog's first
 * renewal and its deadline, so after SIGCONT it runs first: what did the holder see?
 *
 * env PAUSE_WORKER_PORT: the test's redis-server.
 */
import { Redis } from 'ioredis'
import { createLocks, LockLostError } from '../../../src/index.js'
import { serveRequests } from '../../support/worker-side.js'

export interface PauseRequest {
  key: string
  /** Lease of the lock, ms (renewal at lease/3, deadline at lease − 1 % − 2 ms). */
  lease: number
  /** When the work timer fires after acquisition, ms: before the renewal (lease/3 − lease/12 at the earliest). */
  workAt: number
}

export interface PauseReply {
  /** `signal.aborted` at the first instruction of the work timer after the resume. */
  abortedAtWork: boolean
  /** `validForMs` there. */
  validForMsAtWork: number
  /** What `assertHeld()` threw there (`name`), or null if it did not. */
  assertHeldThrew: string | null
  /** `signal.aborted` right after that `assertHeld()` call. */
  abortedAfterAssert: boolean
  /** Monotonic ms from acquisition to the work timer's run (the pause included). */
  ranAfterMs: number
}

const client = new Redis({ host: '127.0.0.1', port: Number(process.env.PAUSE_WORKER_PORT) })
const locks = createLocks({ redis: client, namespace: 'pause' })

serveRequests(async (request: PauseRequest): Promise<PauseReply> => {
  const lock = await locks.acquire(request.key, { lease: request.lease, wait: 0 })
  const acquiredAt = performance.now()
  const work = new Promise<PauseReply>((resolve) => {
    setTimeout(() => {
      // The first instructions after the resume: the canonical check, then the new one.
      const abortedAtWork = lock.signal.aborted
      const validForMsAtWork = lock.validForMs
      let assertHeldThrew: string | null = null
      try {
        lock.assertHeld()
      } catch (error) {
        assertHeldThrew = error instanceof LockLostError ? 'LockLostError' : String(error)
      }
      resolve({
        abortedAtWork,
        validForMsAtWork,
        assertHeldThrew,
        abortedAfterAssert: lock.signal.aborted,
        ranAfterMs: performance.now() - acquiredAt,
      })
    }, request.workAt)
  })
  process.kill(process.pid, 'SIGSTOP') // stops here, synchronously, until the test sends SIGCONT
  const reply = await work
  await lock.release().catch(() => {})
  return reply
})
