/**
 * runOnce and coalesce jobs get `validForMs` and `assertHeld()`, as a lock's holder does:
 * after the event loop was blocked past the claim's local deadline (a pause, a GC, a
 * SIGSTOP: no timer has run yet, so `signal.aborted` is still false), the first
 * `assertHeld()` throws `LockLostError` and aborts `signal`. On Redis, in one process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LockLostError } from '../../../src/errors.js'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'

/** Blocks the event loop (no timer runs) for `ms`, as a paused process would. */
function blockFor(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // spin
  }
}

interface Checked {
  validAtStart: number
  abortedAfterPause: boolean
  validAfterPause: number
  thrown: unknown
  abortedAfterCheck: boolean
}

async function check(context: { signal: AbortSignal; validForMs: number; assertHeld(): void }, pauseMs: number) {
  const validAtStart = context.validForMs
  context.assertHeld() // held: no throw
  blockFor(pauseMs)
  const checked: Checked = {
    validAtStart,
    abortedAfterPause: context.signal.aborted,
    validAfterPause: context.validForMs,
    thrown: undefined,
    abortedAfterCheck: false,
  }
  try {
    context.assertHeld()
  } catch (error) {
    checked.thrown = error
  }
  checked.abortedAfterCheck = context.signal.aborted
  return checked
}

describe.skipIf(!redisAvailable)('runOnce / coalesce: assertHeld() and validForMs read the clock', () => {
  let redis: RedisServer
  let locks: Locks
  let count = 0
  beforeAll(async () => {
    redis = await startRedis()
    locks = createLocks({ redis: redis.client(), namespace: 'run-assert' })
  })
  afterAll(async () => {
    await locks?.close()
    await redis?.stop()
  })

  const expectCaught = (checked: Checked, atMostMs: number) => {
    expect(checked.validAtStart).toBeGreaterThan(0)
    expect(checked.validAtStart).toBeLessThanOrEqual(atMostMs)
    expect(checked.abortedAfterPause).toBe(false) // what `if (signal.aborted)` would have said
    expect(checked.validAfterPause).toBe(0)
    expect(checked.thrown).toBeInstanceOf(LockLostError)
    expect(checked.abortedAfterCheck).toBe(true)
  }

  for (const keepAlive of [false, true]) {
    it(`runOnce (keepAlive ${keepAlive}): blocked past lockAtMostFor, assertHeld() throws although signal has not aborted`, async () => {
      const result = await locks.runOnce(`job-${++count}`, (context) => check(context, 400), {
        lockAtMostFor: 300,
        keepAlive,
      })
      expect(result.ran).toBe(true)
      expectCaught((result as { value: Checked }).value, 300)
    })
  }

  it('coalesce: blocked past the lease, assertHeld() throws although signal has not aborted', async () => {
    const result = await locks.coalesce(`coalesced-${++count}`, (context) => check(context, 400), { lease: 300 })
    expect(result.ran).toBe(true)
    expectCaught((result as { value: Checked }).value, 300)
  })
})
