/**
 * The Redis lock backend losing only its subscriber connection (CLIENT KILL TYPE pubsub),
 * against a real redis-server: a release published while the waiter's subscriber is down
 * is lost, and the waiter must not sleep on to its 5 s safety-net poll (measured 5.0 s
 * before every wait was polled on the subscriber's loss and return).
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/index.js'
import type { PollScheduler } from '../../../src/redis/poll-scheduler.js'
import { SUBSCRIBED_MAX_SLEEP_MS } from '../../../src/lock/waiting.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'

/** The subscriber reconnects after this long: the gap the release falls into. */
const RECONNECT_MS = 600

describe.skipIf(!redisAvailable)('Redis lock: subscriber connection lost', () => {
  let server: RedisServer
  let admin: Redis
  const opened: Locks[] = []
  const clients: Redis[] = []
  beforeAll(async () => {
    server = await startRedis()
    admin = server.client()
  })
  afterAll(async () => {
    await Promise.all(opened.map((locks) => locks.close()))
    for (const client of [...clients, admin]) client?.disconnect()
    await server?.stop()
  })

  function front(options: { reconnectMs?: number; maxPollRate?: number } = {}) {
    const client = server.client(options.reconnectMs ? { retryStrategy: () => options.reconnectMs } : {})
    client.on('error', () => {})
    clients.push(client)
    const locks = createLocks({ redis: { client, maxPollRate: options.maxPollRate }, namespace: 'subloss' })
    opened.push(locks)
    const backend = (locks as unknown as { backend: { polls: PollScheduler; notifier: { subscriber?: Redis } } })
      .backend
    return { locks, polls: backend.polls, subscriber: () => backend.notifier.subscriber }
  }

  it('a release published while the subscriber is down reaches its waiter once it is back, not at the 5 s poll', async () => {
    const holder = front()
    const waiter = front({ reconnectMs: RECONNECT_MS })
    const held = await holder.locks.acquire('k', { lease: '30s' }) // the lease does not bound the waiter's sleep
    const acquiring = waiter.locks.acquire('k', { wait: '20s' })
    acquiring.catch(() => {}) // awaited below; a failed assertion must not leave it unhandled at close()
    await until(
      () => waiter.polls.waits === 1 && waiter.subscriber()?.status === 'ready',
      'the waiter to subscribe and sleep',
    )
    let backAt = 0
    waiter.subscriber()!.on('ready', () => (backAt ||= performance.now()))
    const polledBefore = waiter.polls.counts.keys

    expect(await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub')).toBeGreaterThanOrEqual(1)
    await until(() => waiter.subscriber()!.status !== 'ready', 'the waiter to see its subscriber drop')
    // A poll on the drop (sent within 20 ms, answered within a loopback round trip) finds the
    // lock still held: the release then falls where only the poll on the subscriber's return catches it.
    const inFlight = () => (waiter.polls as unknown as { callsInFlight: number }).callsInFlight
    await until(
      () => waiter.polls.counts.keys > polledBefore && inFlight() === 0,
      'the poll on the drop to be answered',
    )
    const releasedAt = performance.now()
    await held.release() // its message is published to nobody
    expect(waiter.subscriber()!.status).not.toBe('ready') // it really fell in the gap

    const got = await acquiring
    const tookMs = performance.now() - releasedAt
    expect(backAt).toBeGreaterThan(0)
    expect(backAt).toBeLessThan(performance.now())
    // One poll when it dropped (still held), one when it was back (gone): not the 5 s one.
    const polls = waiter.polls.counts.keys - polledBefore
    expect(polls).toBeGreaterThanOrEqual(1)
    expect(polls).toBeLessThanOrEqual(4)
    // The reconnect (600 ms) and a round trip; before: ~5,000 (the subscribed waiter's longest sleep).
    // Half that sleep is generous on a busy machine and still tells the two apart.
    expect(tookMs).toBeLessThan(SUBSCRIBED_MAX_SLEEP_MS / 2)
    await got.release()
  })

  it('the polls on a lost subscriber stay within maxPollRate: 300 waits, 2 calls/s', async () => {
    const holder = front()
    const waiter = front({ reconnectMs: RECONNECT_MS, maxPollRate: 2 })
    const keys = Array.from({ length: 300 }, (_, i) => `many${i}`)
    const held = await Promise.all(keys.map((key) => holder.locks.acquire(key, { lease: '30s' })))
    const acquiring = keys.map((key) => waiter.locks.acquire(key, { wait: '30s' }))
    for (const promise of acquiring) promise.catch(() => {}) // awaited below
    await until(
      () => waiter.polls.waits === 300 && waiter.subscriber()?.status === 'ready',
      'the waiters to subscribe and sleep',
      10_000,
    )
    const polledBefore = { ...waiter.polls.counts }
    const killedAt = performance.now()
    expect(await admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub')).toBeGreaterThanOrEqual(1)
    await until(
      () => waiter.subscriber()?.status === 'ready' && performance.now() - killedAt > RECONNECT_MS,
      'the subscriber to come back',
      5_000,
    )
    await sleep(1_000)
    const spentS = (performance.now() - killedAt) / 1000
    // Lost and restored: up to 600 polls asked for, in calls of many keys, at most 2 calls a second (+ 1 saved up).
    const polled = waiter.polls.counts.keys - polledBefore.keys
    const calls = waiter.polls.counts.calls - polledBefore.calls
    expect(polled).toBeGreaterThan(0)
    expect(calls).toBeLessThanOrEqual(Math.ceil(2 * spentS) + 1 + 1)
    await Promise.all(held.map((lock) => lock.release()))
    const got = await Promise.all(acquiring)
    await Promise.all(got.map((lock) => lock.release()))
  }, 60_000)
})
