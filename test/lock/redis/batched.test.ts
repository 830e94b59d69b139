/**
 * The Redis lock backend with many locks, counted: renewals of the locks one process holds
 * go out in few extend-many.lua calls, a lock found lost in such a call aborts its own
 * signal only, and waits share one poll budget (`redis.maxPollRate`).
 */
import { describe, expect, it } from 'vitest'
import { createLocks, LockLostError, type HeldLockHandle } from '../../../src/index.js'
import { redisAvailable } from '../../support/redis.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { countScripts } from '../../support/script-calls.js'
import { sleep, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('Redis lock: many locks', () => {
  const suite = useRedisServer()

  it('renews the locks it holds in batched calls, and a lock lost among them aborts only its own signal', async () => {
    const client = suite.server().client()
    const sent = countScripts(client)
    const locks = createLocks({ redis: client, namespace: 'many', lease: '1500ms' })
    const HELD = 1_000
    const handles: HeldLockHandle[] = await Promise.all(Array.from({ length: HELD }, (_, i) => locks.acquire(`k${i}`)))
    await sleep(3_000) // about 6 renewals of each lock (every lease/3, a little early on the grid)
    const renewals = sent['extend-many.lua'] ?? { calls: 0, keys: 0 }
    console.log(`[many locks] ${HELD} locks held 3 s: ${renewals.keys} renewals in ${renewals.calls} calls`)
    expect(renewals.keys).toBeGreaterThanOrEqual(2 * HELD)
    expect(renewals.calls).toBeLessThanOrEqual(renewals.keys / 50) // before: one call per renewal
    expect(handles.every((handle) => !handle.signal.aborted)).toBe(true)

    // Another owner takes k7 (its lock was lost: say it expired during a pause): the next batch finds out.
    await suite.admin().set('many:{l:k7}:lock', 'someone-else:1', 'PX', 60_000)
    await until(() => handles[7]!.signal.aborted, 'the lost lock to abort its signal', 5_000)
    expect(handles[7]!.signal.reason).toBeInstanceOf(LockLostError)
    expect((handles[7]!.signal.reason as LockLostError).reason).toMatch(/taken by another owner/)
    await sleep(1_000) // two more renewal rounds: the rest are still held
    expect(handles.filter((handle) => handle.signal.aborted).length).toBe(1)
    expect(await suite.admin().get('many:{l:k7}:lock')).toBe('someone-else:1') // a renewal never takes it back
    await Promise.all(handles.map((handle) => handle.release()))
    await locks.close()
    client.disconnect()
  }, 30_000)

  it('waits on many held locks poll within maxPollRate, and each waiter gets its lock once released', async () => {
    const holderClient = suite.server().client()
    const waiterClient = suite.server().client()
    const sent = countScripts(waiterClient)
    const holder = createLocks({ redis: holderClient, namespace: 'polls', lease: '1500ms' })
    const RATE = 2 // poll calls a second
    const waiter = createLocks({ redis: { client: waiterClient, maxPollRate: RATE }, namespace: 'polls', wait: '1m' })
    const KEYS = 300
    const held = await Promise.all(Array.from({ length: KEYS }, (_, i) => holder.acquire(`k${i}`)))
    const waits = held.map((_, i) => waiter.acquire(`k${i}`))
    await until(
      () => (sent['acquire.lua']?.calls ?? 0) >= 2 * KEYS,
      'every waiter to try, subscribe and try again',
      30_000,
    )
    await sleep(300)
    const before = {
      polled: sent['poll-locks.lua']?.keys ?? 0,
      calls: sent['poll-locks.lua']?.calls ?? 0,
      attempts: sent['acquire.lua']?.calls ?? 0,
    }
    const startedAt = performance.now()
    await sleep(2_000)
    const elapsedS = (performance.now() - startedAt) / 1000
    const polled = (sent['poll-locks.lua']?.keys ?? 0) - before.polled
    const calls = (sent['poll-locks.lua']?.calls ?? 0) - before.calls
    const attempts = (sent['acquire.lua']?.calls ?? 0) - before.attempts
    console.log(
      `[many locks] ${KEYS} waits over ${elapsedS.toFixed(1)} s: ${polled} keys polled in ${calls} calls (budget ${RATE} calls/s), ${attempts} attempts`,
    )
    // Each waiter would poll as often as the holder's 1.5 s lease comes near its end: some 300 calls a second.
    // The budget: 2 calls a second, plus the 1 saved up at most.
    expect(calls).toBeLessThanOrEqual(RATE * elapsedS + 1 + 1)
    expect(polled).toBeGreaterThan(calls) // several keys per call
    expect(attempts).toBe(0) // every lock was held: no poll woke a waiter
    await Promise.all(held.map((handle) => handle.release()))
    const acquired = await Promise.all(waits)
    expect(acquired.every((handle, i) => handle.token > held[i]!.token)).toBe(true)
    await Promise.all(acquired.map((handle) => handle.release()))
    await Promise.all([holder.close(), waiter.close()])
    holderClient.disconnect()
    waiterClient.disconnect()
  }, 60_000)
})
