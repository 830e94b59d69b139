/**
 * The lock front's events (`locks.on`), on a real redis-server: one `acquired` or `busy`
 * per acquisition and one `released` or `lost` per hold, nothing for a reentrant reuse
 * or an aborted wait, `backend-error` for a failed renewal, and a listener that throws
 * (or unsubscribes while called) breaks no lock call. instrumentLocks' metrics over them: test/observability/locks.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLocks,
  InvalidArgumentError,
  LockLostError,
  LocksClosedError,
  RedisUnavailableError,
  type Locks,
} from '../../../src/index.js'
import type { LockEventName, LockEvents } from '../../../src/lock/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { abortReason, until } from '../../support/timing.js'

type Recorded = { [E in LockEventName]: { event: E } & LockEvents[E] }[LockEventName]

/** Every event `locks` emits, in order, until the returned stop() is called. */
function record(locks: Locks<unknown>): { events: Recorded[]; names: () => string[]; stop: () => void } {
  const events: Recorded[] = []
  const names: LockEventName[] = ['acquired', 'busy', 'released', 'lost', 'backend-error']
  const offs = names.map((event) => locks.on(event, (payload) => events.push({ event, ...payload } as Recorded)))
  return { events, names: () => events.map((e) => `${e.event} ${e.key}`), stop: () => offs.forEach((off) => off()) }
}

describe.skipIf(!redisAvailable)('lock events (locks.on) on the Redis backend', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedis()
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('one acquired or busy per acquisition, one released or lost per hold; reentrant reuse and aborted waits emit nothing', async () => {
    const redis = server.client()
    const locks = createLocks({ redis, namespace: 'ev1' })
    const recorder = record(locks as Locks<unknown>)

    await locks.withLock('a', async () => {
      await locks.withLock('a', () => {}, { reentrant: true }) // the chain's own lock: no acquisition
    })
    const held = await locks.acquire('b')
    expect(await locks.tryAcquire('b')).toBeUndefined()
    const abort = new AbortController()
    const aborted = locks.acquire('b', { wait: '30s', signal: abort.signal }).catch((error: unknown) => error)
    abort.abort(new Error('caller gave up'))
    expect(await aborted).toMatchObject({ message: 'caller gave up' })
    await held.release()
    await held.release()
    expect(recorder.names()).toEqual(['acquired a', 'released a', 'acquired b', 'busy b', 'released b'])
    for (const event of recorder.events) expect(event.backend).toBe('redis')
    const busy = recorder.events.find((e) => e.event === 'busy')!
    expect(busy).toMatchObject({ waitedMs: expect.any(Number) })

    // close() ends a held lock: lost (with close's reason), and its release after that adds nothing.
    const open = await locks.acquire('c')
    await locks.close()
    await open.release()
    expect(recorder.names().slice(5)).toEqual(['acquired c', 'lost c'])
    expect(recorder.events.at(-1)).toMatchObject({
      event: 'lost',
      reason: 'close() was called',
      heldMs: expect.any(Number),
    })
    recorder.stop()
    redis.disconnect()
  })

  it('a renewal that fails is a backend-error (renew), and the lease running out unconfirmed is one lost', async () => {
    const redis = server.client({ maxRetriesPerRequest: 1 })
    const locks = createLocks({ redis, namespace: 'ev2', commandTimeout: 100 })
    const recorder = record(locks as Locks<unknown>)
    const held = await locks.acquire('r', { lease: 600 })
    server.pause() // SIGSTOP: renewals (every 200 ms) time out after 100 ms
    try {
      expect(await abortReason(held.signal, 'the lease to run out unconfirmed')).toBeInstanceOf(LockLostError)
    } finally {
      server.resume()
    }
    const failures = recorder.events.filter((e) => e.event === 'backend-error')
    expect(failures.length).toBeGreaterThanOrEqual(1)
    for (const failure of failures)
      expect(failure).toMatchObject({ key: 'r', operation: 'renew', error: expect.any(RedisUnavailableError) })
    await held.release().catch(() => {})
    expect(recorder.events.filter((e) => e.event === 'lost')).toHaveLength(1)
    expect(recorder.events.filter((e) => e.event === 'released')).toHaveLength(0)
    recorder.stop()
    await locks.close()
    redis.disconnect()
  })

  it('a listener that throws breaks no lock call, one that unsubscribes mid-emit makes no other miss it; on() refuses an unknown event or a non-function', async () => {
    const redis = server.client()
    const locks = createLocks({ redis, namespace: 'ev3' })
    const off = locks.on('acquired', () => {
      throw new Error('listener bug')
    })
    const offReleased = locks.on('released', () => {
      throw new Error('listener bug')
    })
    expect(await locks.withLock('k', () => 7)).toBe(7)
    await until(async () => (await redis.exists('ev3:{l:k}:lock')) === 0, 'the release')
    off()
    offReleased()
    // A listener that unsubscribes while being called does not make the next one miss the event.
    const calls = { first: 0, second: 0 }
    const offFirst = locks.on('acquired', () => {
      calls.first++
      offFirst()
    })
    const offSecond = locks.on('acquired', () => void calls.second++)
    await locks.withLock('k', () => {})
    await locks.withLock('k', () => {})
    expect(calls).toEqual({ first: 1, second: 2 })
    offSecond()
    offSecond() // twice: a no-op
    expect(() => locks.on('acquire' as never, () => {})).toThrow(InvalidArgumentError)
    expect(() => locks.on('lost', 'nope' as never)).toThrow(InvalidArgumentError)
    await locks.close()
    await expect(locks.acquire('k')).rejects.toBeInstanceOf(LocksClosedError)
    redis.disconnect()
  })
})
