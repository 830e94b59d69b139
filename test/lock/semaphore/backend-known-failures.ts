/**
 * The peers' known failures, run on every non-Redis semaphore backend as on Redis
 * (./semaphore.cross-process.test.ts), each across real processes (./worker.ts):
 * - a renewal racing a release never resurrects a permit (redis-semaphore #205, #206);
 * - processes whose wall clocks are 10 s ahead and behind share one permit correctly: the
 *   store's own clock and TTL rules, never a client's (./clock-shim.mjs shifts the child's Date);
 * - a connection reset mid-acquire (it ran in the store, its reply never arrived) leaves no
 *   orphan permit: none, or exactly the hold the acquire then finds (Curator 315, 462);
 * - a SIGKILLed waiter in line stops blocking the waiter behind it within about one lease.
 * What a backend cannot express is declared in its `SemaphoreBackendUnderTest` and printed
 * by the test, never skipped in silence.
 */
import { expect, it } from 'vitest'
import { sleep, until } from '../../support/timing.js'
import type { SemaphoreBackendUnderTest, SemaphoreSuite } from './backend-suite.js'
import { clockOffsetEnv } from './fork.js'
import type { AcquireReply, ContendReply } from './protocol.js'
import { startResetProxy } from './reset-proxy.js'

export function knownFailureTests(backend: SemaphoreBackendUnderTest, suite: SemaphoreSuite): void {
  const name = (suffix: string) => `${backend.label}-${suffix}`
  const held = (count: number) => (backend.countsHolders ? count : 0)

  it('a renewal racing a release never resurrects a permit (redis-semaphore #205, #206): 2 processes', async () => {
    const racers = await suite.fork(2)
    const race = name('race')
    const { lease, rounds } = backend.race
    const results = await Promise.all(
      racers.map((worker) =>
        suite.ask<{ lost: number }>(worker, { op: 'race-release', name: race, rounds, lease }, 150_000),
      ),
    )
    await until(() => backend.empty(race), 'nothing left after the last release', 5_000)
    await sleep(3 * lease) // several renewal intervals: a renewal landing late would show as a holder now
    expect(await backend.holderRecords(race)).toBe(0)
    const permit = await suite.locks().semaphore(race, { permits: 1 }).tryAcquire()
    expect(permit).toBeDefined() // no ghost holds the one permit
    await permit!.release()
    console.log(
      `[${backend.label} semaphore race] 2 × ${rounds} renew+release rounds, 0 permits left; releases reported lost (paused past the lease): ${results.map((r) => r.lost).join(', ')}`,
    )
  }, 180_000)

  it('processes whose wall clocks are 10 s ahead and behind share one permit correctly: the store keeps time', async () => {
    const [[ahead], [behind]] = [
      await suite.fork(1, {}, clockOffsetEnv(10_000)),
      await suite.fork(1, {}, clockOffsetEnv(-10_000)),
    ]
    const clock = name('clock')
    const lease = 3_000
    const got = await suite.ask<AcquireReply>(ahead!, {
      op: 'acquire',
      id: 'x',
      name: clock,
      permits: 1,
      count: 1,
      lease,
      wait: 0,
    })
    expect(Math.abs(got.at - Date.now() - 10_000)).toBeLessThan(2_000) // its clock is really 10 s ahead
    if (typeof backend.expiry === 'function') {
      // The permit's expiry is the store's now + lease, not the client's (which would be 10 s off).
      const leftMs = await backend.expiry(clock)
      expect(leftMs).toBeGreaterThan(0)
      expect(leftMs).toBeLessThanOrEqual(lease)
    } else console.log(`[${backend.label} semaphore clock] no stored expiry to check: ${backend.expiry.none}`)
    // The process 10 s behind does not see the permit as expired.
    const behindTry = suite.ask(behind!, { op: 'acquire', id: 'y', name: clock, permits: 1, count: 1, lease, wait: 0 })
    await expect(behindTry).rejects.toThrow(/LockBusyError|held by another owner|not free/)
    await suite.ask(ahead!, { op: 'release', id: 'x' })
    const iterations = 5
    const results = await Promise.all(
      [ahead!, behind!].map((worker) =>
        suite.ask<ContendReply>(
          worker,
          { op: 'contend', name: clock, permits: 1, holders: 3, iterations, lease, holdMs: backend.fleet.holdMs },
          150_000,
        ),
      ),
    )
    expect(results.flatMap((r) => r.errors)).toEqual([])
    const resource = suite.resource().client()
    expect(Number(await resource.get(`${clock}:max`))).toBe(1) // never two inside
    expect(Number(await resource.get(`${clock}:entries`))).toBe(2 * 3 * iterations)
    resource.disconnect()
  }, 180_000)

  it(`a connection reset mid-acquire (it ran in the store, its reply never arrived) leaves no orphan permit (Curator 315, 462)`, async () => {
    const store = suite.store()
    const proxy = await startResetProxy(store.port)
    try {
      const reset = name('reset')
      const [worker] = await suite.fork(1, store.via(proxy.port))
      // Warm up on the same semaphore, and keep that permit: the store's schema, the
      // connection, the session and the semaphore's own records are all there already, so
      // the armed request is the acquire's own (not a first create that finds no parent).
      const permit = (id: string, count: number) =>
        suite.ask<AcquireReply>(worker!, { op: 'acquire', id, name: reset, permits: 3, count, lease: 10_000, wait: 0 })
      await permit('warm', 1)
      proxy.armResetOnRequest(backend.reset.marker(reset), async () => (await backend.holderRecords(reset)) > 1)
      const outcome = await permit('r', 2).then(
        (reply) => ({ held: true as const, reply }),
        (error: Error) => ({ held: false as const, error: error.message }),
      )
      expect(proxy.resets).toBe(1)
      expect(proxy.confirmedRuns).toBe(1) // the acquire did take effect in the store before the reset
      console.log(
        `[${backend.label} semaphore reset] ${outcome.held ? 'held after the reset' : outcome.error} (expected ${backend.reset.outcome}: ${backend.reset.why})`,
      )
      // The warm-up's holder, and the reset one's only if its acquire answered "held". An
      // orphan would stay for the whole 10 s lease (or the session).
      const expected = outcome.held ? 2 : 1
      await until(async () => (await backend.holderRecords(reset)) === expected, 'no orphan permit', 5_000)
      await sleep(300)
      expect(await backend.holderRecords(reset)).toBe(expected)
      expect(outcome.held ? 'held' : 'failed').toBe(backend.reset.outcome)
      if (outcome.held) {
        expect(outcome.reply.tokens).toHaveLength(2)
        await suite.ask(worker!, { op: 'release', id: 'r' })
      }
      await suite.ask(worker!, { op: 'release', id: 'warm' })
      await until(() => backend.empty(reset), 'nothing left of the semaphore', 5_000)
    } finally {
      await proxy.close()
    }
  }, 120_000)

  it('a SIGKILLed waiter in line stops blocking the waiter behind it within about one lease', async () => {
    const [doomed, patient] = await suite.fork(2)
    const line = name('dead-waiter')
    const { lease, withinMs } = backend.crash
    const holder = await suite.locks().semaphore(line, { permits: 1 }).acquire(1, { lease: '20s' })
    const waiting = (id: string) => ({
      op: 'acquire' as const,
      id,
      name: line,
      permits: 1,
      count: 1,
      lease,
      wait: 60_000,
    })
    void suite.ask(doomed!, waiting('d')).catch(() => {})
    await until(async () => (await backend.inLine(line)) === held(1) + 1, 'the doomed waiter in line', 30_000)
    const served = suite.ask<AcquireReply>(patient!, waiting('p'))
    await until(async () => (await backend.inLine(line)) === held(1) + 2, 'the patient waiter in line', 30_000)
    doomed!.kill('SIGKILL')
    const releasedAt = Date.now() // the same wall clock as the worker's `at` (this machine's)
    await holder.release()
    const afterMs = (await served).at - releasedAt // when the worker had it, not when its reply arrived here
    console.log(
      `[${backend.label} semaphore dead waiter] the live waiter in ${afterMs.toFixed(0)} ms after the release (lease ${lease} ms)`,
    )
    expect(afterMs).toBeLessThan(withinMs)
    await suite.ask(patient!, { op: 'release', id: 'p' })
    await until(() => backend.empty(line), 'nothing left of the semaphore', 10_000)
  }, 120_000)
}
