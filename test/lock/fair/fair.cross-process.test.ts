/**
 * The fair Redis lock across real processes: waiters are served in the order they joined
 * the line whatever process they are in; a release wakes the head alone (counted on the
 * channels); a SIGKILLed waiter at the head is skipped within one lease, also when a
 * release hands it the lock before its beat ran out (the live waiter behind it gets the
 * lock within one lease + 2 beats); a live waiter that waits many leases keeps its place.
 */
import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'
import type { Worker } from '../../support/workers.js'
import { forkTwoAtATime } from '../semaphore/fork.js'
import type { FairWorkerRequest } from './worker.js'

const WORKER = new URL('./worker.ts', import.meta.url)

describe.skipIf(!redisAvailable)('fair Redis lock across processes', () => {
  let server: RedisServer
  let admin: Redis
  let locks: Locks
  let workers: Worker[] = []
  beforeAll(async () => {
    server = await startRedis()
    admin = server.client()
    locks = createLocks({ redis: server.client(), namespace: 'fair', fair: true })
  })
  afterEach(async () => {
    await Promise.all(workers.map((worker) => worker.stop()))
    workers = []
  })
  afterAll(async () => {
    await locks?.close()
    await server?.stop()
  })

  async function fork(count: number): Promise<Worker[]> {
    const env = { FAIR_WORKER: JSON.stringify({ port: server.port, fair: true }) }
    const started = await forkTwoAtATime(WORKER, count, env)
    workers.push(...started)
    return started
  }
  const ask = <T>(worker: Worker, request: FairWorkerRequest, timeoutMs = 60_000) =>
    worker.request<T>(request, timeoutMs)
  const inLine = (key: string) => admin.zcard(`fair:{l:${key}}:q`)

  it('4 processes: served in the order they joined the line, each release waking the head alone', async () => {
    const waiters = await fork(4)
    const key = 'order'
    const holder = await locks.acquire(key, { lease: '10s' })
    const order: number[] = []
    const pending: Promise<unknown>[] = []
    for (const [index, worker] of waiters.entries()) {
      pending.push(ask(worker, { op: 'acquire', key, lease: 10_000, wait: 60_000 }).then(() => order.push(index)))
      await until(async () => (await inLine(key)) === index + 1, `waiter ${index} in line`, 30_000)
    }
    // Each waiter listens on a channel of its own; a pattern subscriber counts the wake-ups.
    const channels = async () => ((await admin.pubsub('CHANNELS', `fair:{l:${key}}:w:*`)) as string[]).length
    await until(async () => (await channels()) === 4, 'each waiter to subscribe its own channel', 30_000)
    const spy = server.client()
    const wakeups: string[] = []
    spy.on('pmessage', (_pattern: string, channel: string) => wakeups.push(channel))
    await spy.psubscribe(`fair:{l:${key}}:w:*`)
    await holder.release()
    for (let served = 0; served < 4; served++) {
      await until(() => order.length === served + 1, `waiter ${served + 1} to be served`, 30_000)
      await sleep(50) // nobody else gets in meanwhile
      expect(order).toHaveLength(served + 1)
      // One wake-up per release, on one channel (beats that found the lock free may add a repeat for the same head).
      expect(new Set(wakeups).size).toBe(served + 1)
      await ask(waiters[order[served]!]!, { op: 'release', key })
    }
    console.log(
      `[fair order] ${wakeups.length} wake-up messages for 5 releases (the last with nobody in line), on ${new Set(wakeups).size} channels`,
    )
    spy.disconnect()
    await Promise.all(pending)
    expect(order).toEqual([0, 1, 2, 3])
    expect(await inLine(key)).toBe(0)
  }, 120_000)

  it('a SIGKILLed waiter at the head is skipped within one lease; a live waiter waiting 5 leases keeps its place', async () => {
    const [doomed, patient] = await fork(2)
    const key = 'dead-head'
    const lease = 600
    const holder = await locks.acquire(key, { lease: '20s' })
    void ask(doomed!, { op: 'acquire', key, lease, wait: 60_000 }).catch(() => {})
    await until(async () => (await inLine(key)) === 1, 'the doomed waiter in line', 30_000)
    const served = ask<{ at: number }>(patient!, { op: 'acquire', key, lease, wait: 60_000 })
    await until(async () => (await inLine(key)) === 2, 'the patient waiter in line', 30_000)
    doomed!.kill('SIGKILL')
    await sleep(5 * lease) // the patient one beats every lease/3 all along
    expect(await inLine(key)).toBe(1) // the dead one is gone, the live one is still there
    const releasedAt = performance.timeOrigin + performance.now()
    await holder.release()
    const { at } = await served
    console.log(`[fair dead-head] the live waiter in ${(at - releasedAt).toFixed(1)} ms after the release`)
    expect(at - releasedAt).toBeLessThan(lease + 1_000)
    await ask(patient!, { op: 'release', key })
  }, 120_000)

  it('a waiter SIGKILLed at the head, released to at once: the live waiter behind it has the lock within one lease + 2 beats of the release', async () => {
    const [doomed, patient] = await fork(2)
    const key = 'dead-at-release'
    const lease = 1_500
    const beatMs = lease / 3 // a waiter's attempts (its heartbeats) are at most this far apart
    const holder = await locks.acquire(key, { lease: '20s' })
    void ask(doomed!, { op: 'acquire', key, lease, wait: 60_000 }).catch(() => {})
    await until(async () => (await inLine(key)) === 1, 'the doomed waiter in line', 30_000)
    const [doomedOwner] = await admin.zrange(`fair:{l:${key}}:q`, '0', '0')
    const served = ask<{ at: number }>(patient!, { op: 'acquire', key, lease, wait: 60_000 })
    await until(async () => (await inLine(key)) === 2, 'the patient waiter in line', 30_000)
    doomed!.kill('SIGKILL')
    const releasedAt = performance.timeOrigin + performance.now()
    await holder.release()
    // The release handed the lock to the dead head (its beat was still live): what holds the line up.
    const [handedTo, handedForMs] = await Promise.all([
      admin.get(`fair:{l:${key}}:lock`),
      admin.pttl(`fair:{l:${key}}:lock`),
    ])
    expect(handedTo?.startsWith(`${doomedOwner}:`)).toBe(true)
    expect(handedForMs).toBeLessThanOrEqual(lease) // at most what was left of its beat
    const { at } = await served
    const afterMs = at - releasedAt
    console.log(
      `[fair dead-at-release] handed to the dead head for ${handedForMs} ms; the live waiter in ${afterMs.toFixed(0)} ms (${(afterMs / lease).toFixed(2)} leases) after the release`,
    )
    // One lease for the dead head's hand-off to run out, one beat for the live waiter's next
    // attempt to come due, one more beat of slack for a loaded machine's timers.
    expect(afterMs).toBeLessThan(lease + 2 * beatMs)
    await ask(patient!, { op: 'release', key })
    expect(await inLine(key)).toBe(0)
  }, 120_000)
})
