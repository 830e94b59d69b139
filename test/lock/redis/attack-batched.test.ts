/**
 * Attacks on batched lease renewals and the shared poll scheduler of the Redis lock
 * backend, against a real redis-server: mixed leases in one process, a user's extend
 * among batched renewals, a release while a renewal is in flight, renewal calls that time
 * out, Redis stopped (SIGSTOP) for longer than the lease, a lost release message under a
 * poll budget of 1/s, and close() with many waits and renewals pending.
 */
import { describe, expect, it } from 'vitest'
import { createLocks, LockBusyError, LockLostError, LocksClosedError } from '../../../src/index.js'
import { redisAvailable } from '../../support/redis.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { PollScheduler } from '../../../src/redis/poll-scheduler.js'
import { countScripts } from '../../support/script-calls.js'
import { sleep, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('attack: batched renewals and shared polls (Redis lock)', () => {
  const suite = useRedisServer()

  it('a short lease renewed among 500 long ones stays held, and a user extend() on one lock sticks', async () => {
    const client = suite.server().client()
    const sent = countScripts(client)
    const locks = createLocks({ redis: client, namespace: 'mixed' })
    const long = await Promise.all(Array.from({ length: 500 }, (_, i) => locks.acquire(`long${i}`, { lease: '30s' })))
    const short = await locks.acquire('short', { lease: '400ms' })
    const extended = await locks.acquire('ext', { lease: '1500ms' })
    await extended.extend('30s')
    expect(await suite.admin().pttl('mixed:{l:ext}:lock')).toBeGreaterThan(25_000)
    await sleep(3_000) // about 9 renewals of the short lock; the extended one renews at 30 s now
    expect(short.signal.aborted).toBe(false)
    expect(await suite.admin().pttl('mixed:{l:short}:lock')).toBeGreaterThan(0)
    expect(extended.signal.aborted).toBe(false)
    // Its watchdog renews at the lease the user asked for, not the one it was taken with.
    expect(await suite.admin().pttl('mixed:{l:ext}:lock')).toBeGreaterThan(25_000)
    expect(long.every((handle) => !handle.signal.aborted)).toBe(true)
    expect(sent['extend-many.lua']!.keys).toBeGreaterThanOrEqual(6)
    await Promise.all([...long, short, extended].map((handle) => handle.release()))
    expect(await suite.admin().exists('mixed:{l:short}:lock', 'mixed:{l:ext}:lock')).toBe(0)
    await locks.close()
    client.disconnect()
  }, 30_000)

  it('a lock released while its batched renewal is stuck is not revived by that renewal', async () => {
    const client = suite.server().client()
    const locks = createLocks({ redis: client, namespace: 'revive', commandTimeout: '150ms' })
    const handles = await Promise.all(Array.from({ length: 50 }, (_, i) => locks.acquire(`k${i}`, { lease: '600ms' })))
    // Every call of every client waits 500 ms: the renewals sent meanwhile are stuck, then time out.
    await sleep(150)
    await suite.admin().client('PAUSE', 500, 'ALL')
    await sleep(100) // the renewals at lease/3 (~200 ms) are in flight
    const released = await Promise.allSettled(handles.map((handle) => handle.release()))
    await sleep(700) // Redis runs what was queued: the late renewals, then the releases
    const left = await suite.admin().keys('revive:*:lock')
    console.log(
      `[attack] releases: ${released.filter((r) => r.status === 'rejected').length} rejected (timed out); locks left: ${left.length}`,
    )
    // A release that timed out still reached Redis behind its renewal: nothing is left held.
    expect(left).toEqual([])
    await locks.close()
    client.disconnect()
  }, 30_000)

  it('renewal calls that time out are retried in time: no lock of 500 is lost to a 600 ms stall', async () => {
    const client = suite.server().client()
    const locks = createLocks({ redis: client, namespace: 'stall', commandTimeout: '200ms' })
    // Setting up is not what is tested: an acquire that a loaded machine delays past the 200 ms
    // timeout is asked again (the stall below is what the renewals must survive).
    const acquire = async (key: string): Promise<Awaited<ReturnType<typeof locks.acquire>>> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await locks.acquire(key, { lease: '2s' })
        } catch (error) {
          if (attempt >= 5 || (error as Error).name !== 'RedisUnavailableError') throw error
        }
      }
    }
    const handles = await Promise.all(Array.from({ length: 500 }, (_, i) => acquire(`k${i}`)))
    await sleep(300)
    await suite.admin().client('PAUSE', 600, 'ALL')
    await sleep(2_500)
    const lost = handles.filter((handle) => handle.signal.aborted)
    console.log(`[attack] after a 600 ms stall: ${lost.length} of 500 lost`, lost[0]?.signal.reason)
    expect(lost.length).toBe(0)
    expect(await suite.admin().keys('stall:*:lock')).toHaveLength(500)
    // Tearing down is not what is tested either: 500 releases at once can outlast the 200 ms
    // timeout on a loaded machine (seen in CI); close() gives back whatever is still held.
    await Promise.all(handles.map((handle) => handle.release().catch(() => {})))
    await locks.close()
    client.disconnect()
  }, 30_000)

  it('Redis stopped longer than the lease: every holder learns it lost its lock before Redis is back, and a renewal never revives one', async () => {
    const client = suite.server().client()
    const locks = createLocks({ redis: client, namespace: 'stop', commandTimeout: '300ms' })
    const COUNT = 200
    const handles = await Promise.all(Array.from({ length: COUNT }, (_, i) => locks.acquire(`k${i}`, { lease: '1s' })))
    const lostAt = new Map<number, number>()
    handles.forEach((handle, i) => handle.signal.addEventListener('abort', () => lostAt.set(i, performance.now())))
    await sleep(200)
    suite.server().pause()
    const stoppedAt = performance.now()
    await sleep(2_500)
    const resumedAt = performance.now()
    suite.server().resume()
    expect(lostAt.size).toBe(COUNT)
    for (const at of lostAt.values()) expect(at).toBeLessThan(resumedAt)
    expect(Math.max(...lostAt.values()) - stoppedAt).toBeLessThan(1_500) // the 1 s lease, plus a loaded box's timer lateness
    for (const handle of handles) expect((handle.signal.reason as LockLostError).reason).toMatch(/lease ran out/)
    // Another process takes them once Redis is back; the first holders' renewals go on, and must not touch them.
    const otherClient = suite.server().client()
    const other = createLocks({ redis: otherClient, namespace: 'stop', wait: '5s' })
    const taken = await Promise.all(Array.from({ length: COUNT }, (_, i) => other.acquire(`k${i}`, { lease: '5s' })))
    await sleep(1_000) // the first holders' renewals run meanwhile (lease/3)
    const values = await suite.admin().mget(...Array.from({ length: COUNT }, (_, i) => `stop:{l:k${i}}:lock`))
    taken.forEach((handle, i) => expect(values[i]).toMatch(new RegExp(`:${handle.token}$`)))
    await Promise.allSettled(handles.map((handle) => handle.release()))
    expect(await suite.admin().keys('stop:*:lock')).toHaveLength(COUNT) // a release is compare-and-delete
    expect(taken.every((handle) => !handle.signal.aborted)).toBe(true)
    await Promise.all(taken.map((handle) => handle.release()))
    await Promise.all([locks.close(), other.close()])
    client.disconnect()
    otherClient.disconnect()
  }, 30_000)

  it('maxPollRate 1/s and a release message lost with the subscriber connection: the waiter gets in before its deadline, or times out on time', async () => {
    const holderClient = suite.server().client()
    const waiterClient = suite.server().client({ connectionName: 'lost-waiter' })
    const holder = createLocks({ redis: holderClient, namespace: 'lostmsg', lease: '30s' })
    const waiter = createLocks({ redis: { client: waiterClient, maxPollRate: 1 }, namespace: 'lostmsg' })
    const held = await holder.acquire('k')
    const short = await holder.acquire('short')
    const startedAt = performance.now()
    const waiting = waiter.acquire('k', { wait: '15s' })
    const timingOut = waiter.acquire('short', { wait: '2s' }).catch((error: unknown) => error)
    await sleep(500) // both subscribed
    // Cut the subscriber connections, and release while they are down: the message is lost.
    await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await held.release()
    const got = await waiting
    const waitedMs = performance.now() - startedAt
    console.log(`[attack] waiter got the lock ${waitedMs.toFixed(0)} ms after it started waiting (message lost)`)
    expect(got.token).toBeGreaterThan(held.token)
    expect(waitedMs).toBeLessThan(15_000)
    const timedOut = await timingOut
    expect(timedOut).toBeInstanceOf(LockBusyError)
    await got.release()
    await short.release()
    await Promise.all([holder.close(), waiter.close()])
    holderClient.disconnect()
    waiterClient.disconnect()
  }, 30_000)

  it('close() with many waits and renewals pending ends every wait, leaves no poll or lock behind, and rejects nothing unhandled', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    const holderClient = suite.server().client()
    const waiterClient = suite.server().client()
    const sent = countScripts(waiterClient)
    const holder = createLocks({ redis: holderClient, namespace: 'closing', lease: '600ms' })
    const waiter = createLocks({ redis: waiterClient, namespace: 'closing', lease: '600ms', wait: '30s' })
    const COUNT = 300
    const held = await Promise.all(Array.from({ length: COUNT }, (_, i) => holder.acquire(`k${i}`)))
    const mine = await Promise.all(Array.from({ length: COUNT }, (_, i) => waiter.acquire(`m${i}`)))
    const waits = held.map((_, i) => waiter.acquire(`k${i}`).catch((error: unknown) => error))
    await until(() => (sent['acquire.lua']?.calls ?? 0) >= 3 * COUNT, 'every waiter to try twice', 20_000)
    const startedAt = performance.now()
    await waiter.close()
    const results = await Promise.all(waits)
    expect(performance.now() - startedAt).toBeLessThan(5_000) // the waits' own wait is 30 s
    expect(results.every((result) => result instanceof LocksClosedError)).toBe(true)
    expect(mine.every((handle) => handle.signal.aborted)).toBe(true)
    expect(await suite.admin().keys('closing:{l:m*}:lock')).toEqual([])
    const before = { ...(sent['poll-locks.lua'] ?? { calls: 0, keys: 0 }) }
    const renewalsBefore = { ...(sent['extend-many.lua'] ?? { calls: 0, keys: 0 }) }
    await sleep(1_500)
    expect(sent['poll-locks.lua'] ?? { calls: 0, keys: 0 }).toEqual(before)
    expect(sent['extend-many.lua'] ?? { calls: 0, keys: 0 }).toEqual(renewalsBefore)
    await Promise.all(held.map((handle) => handle.release()))
    await holder.close()
    process.off('unhandledRejection', onUnhandled)
    expect(unhandled).toEqual([])
    holderClient.disconnect()
    waiterClient.disconnect()
  }, 40_000)

  it('a poll backoff never sleeps past its maxMs: the jitter stays under the cap (docs: "capped at 5 s")', async () => {
    const client = suite.server().client()
    const WAITS = 20
    const MAX_MS = 1_000
    const locks = Array.from({ length: WAITS }, (_, i) => `cap:{l:k${i}}:lock`)
    for (const lock of locks) await suite.admin().set(lock, 'holder:1', 'PX', 60_000)
    const polledAt = new Map<string, number[]>()
    const scheduler = new PollScheduler(async (batch) => {
      const now = performance.now()
      for (const lock of batch) polledAt.set(lock, [...(polledAt.get(lock) ?? []), now])
      return Promise.all(batch.map((lock) => client.pttl(lock)))
    })
    const startedAt = performance.now()
    const waits = locks.map((lock) => scheduler.enrol(lock, startedAt + 6_500, { firstMs: MAX_MS, maxMs: MAX_MS }))
    await Promise.all(waits.map((wait) => wait.pause(undefined, Infinity))) // until the deadline: every lock stays held
    waits.forEach((wait) => wait.end())
    const gaps = [...polledAt.values()].flatMap((times) => times.map((at, i) => at - (times[i - 1] ?? startedAt)))
    console.log(`[attack] ${gaps.length} poll gaps, longest ${Math.max(...gaps).toFixed(0)} ms (maxMs ${MAX_MS})`)
    expect(gaps.length).toBeGreaterThanOrEqual(WAITS * 5)
    // maxMs, plus the scheduler's 20 ms gathering, plus a busy machine's timer lateness. Before: up to 1.25 × maxMs.
    expect(Math.max(...gaps)).toBeLessThan(MAX_MS + 20 + 150)
    expect(scheduler.timeline.size).toBe(0)
    client.disconnect()
  }, 30_000)
})
