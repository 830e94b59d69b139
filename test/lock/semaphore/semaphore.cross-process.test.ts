/**
 * The Redis semaphore against the known failures of its peers, each across real processes
 * (test/lock/semaphore/worker.ts): a SIGKILLed holder, an expired permit released, a large
 * request behind a stream of small ones, a renewal racing a release, client clocks 10 s
 * off, a connection reset mid-acquire, a SIGKILLed waiter at the head of the line, and 8
 * processes × 50 holders counted by the resource. The other backends run the same known
 * failures through ./backend-known-failures.ts.
 */
import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/index.js'
import { semaphoreKeys } from '../../../src/lock/semaphore/redis/store.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'
import type { Worker } from '../../support/workers.js'
import { clockOffsetEnv, forkTwoAtATime } from './fork.js'
import type {
  AcquireReply,
  ContendReply,
  ReleaseReply,
  SemaphoreWorkerConfig,
  SemaphoreWorkerRequest,
} from './protocol.js'
import { startResetProxy } from './reset-proxy.js'

const WORKER = new URL('./worker.ts', import.meta.url)
const keysOf = (name: string) => semaphoreKeys('sem', name)

describe.skipIf(!redisAvailable)('Redis semaphore across processes', () => {
  let server: RedisServer
  let resourceServer: RedisServer
  let admin: Redis
  let resource: Redis
  let locks: Locks
  let workers: Worker[] = []
  beforeAll(async () => {
    ;[server, resourceServer] = await Promise.all([startRedis(), startRedis()])
    admin = server.client()
    resource = resourceServer.client()
    locks = createLocks({ redis: server.client(), namespace: 'sem' })
  })
  afterEach(async () => {
    await Promise.all(workers.map((worker) => worker.stop()))
    workers = []
  })
  afterAll(async () => {
    await locks?.close()
    await Promise.all([server?.stop(), resourceServer?.stop()])
  })

  async function fork(
    count: number,
    config: Partial<SemaphoreWorkerConfig> = {},
    clockOffsetMs?: number,
  ): Promise<Worker[]> {
    const env = {
      ...clockOffsetEnv(clockOffsetMs),
      SEMAPHORE_WORKER: JSON.stringify({ port: server.port, resourcePort: resourceServer.port, ...config }),
    }
    const started = await forkTwoAtATime(WORKER, count, env)
    workers.push(...started)
    return started
  }
  const ask = <T>(worker: Worker, request: SemaphoreWorkerRequest, timeoutMs = 60_000) =>
    worker.request<T>(request, timeoutMs)
  const inLine = async (name: string) => admin.zcard(keysOf(name).queue)
  const held = async (name: string) => admin.zcard(keysOf(name).holders)

  it("a SIGKILLed holder's permits come back within one lease (Redisson #4462, #2045)", async () => {
    const [holder, waiter] = await fork(2)
    const lease = 1_500
    await ask(holder!, { op: 'acquire', id: 'a', name: 'crash', permits: 2, count: 2, lease, wait: 0 })
    const next = ask<AcquireReply>(waiter!, {
      op: 'acquire',
      id: 'b',
      name: 'crash',
      permits: 2,
      count: 2,
      lease,
      wait: 30_000,
    })
    await until(async () => (await inLine('crash')) === 1, 'the waiter to join the line', 30_000)
    const killedAt = performance.now()
    holder!.kill('SIGKILL')
    const got = await next
    const afterMs = performance.now() - killedAt
    expect(got.tokens).toHaveLength(2)
    expect(afterMs).toBeLessThan(lease + 2_000) // one lease after its last renewal, plus a busy machine's IPC
    expect(await held('crash')).toBe(2) // the waiter's two, none of the dead holder's
    console.log(`[semaphore crash] permits back ${afterMs.toFixed(0)} ms after SIGKILL (lease ${lease} ms)`)
  }, 90_000)

  it('releasing an expired permit reports it lost (LockLostError), never success, and does not free the new holder (Redisson #4091); its late renewal resurrects nothing', async () => {
    const [paused] = await fork(1)
    const lease = 600
    const name = 'expired'
    const first = await ask<AcquireReply>(paused!, {
      op: 'acquire',
      id: 'p',
      name,
      permits: 1,
      count: 1,
      lease,
      wait: 0,
    })
    paused!.kill('SIGSTOP') // cannot renew
    const semaphore = locks.semaphore(name, { permits: 1 })
    const newer = await semaphore.acquire(1, { wait: '20s', lease: '10s' }) // in once the paused permit expired
    expect(newer.token).toBeGreaterThan(BigInt(first.tokens[0]!))
    paused!.kill('SIGCONT') // its watchdog's renewal is due at once, and the release follows
    const release = await ask<ReleaseReply>(paused!, { op: 'release', id: 'p' })
    expect(release).toMatchObject({ released: false, error: 'LockLostError' })
    await sleep(200) // room for any late renewal to land
    expect(await held(name)).toBe(1) // only the newer holder's permit
    newer.assertHeld()
    await newer.extend() // still ours in the store
    await newer.release()
    expect(await held(name)).toBe(0)
    console.log(`[semaphore expired] release of the expired permit: ${JSON.stringify(release)}`)
  }, 90_000)

  it('acquire(3) is not starved by a stream of acquire(1) from 3 processes (redis-semaphore #18, Redisson #3573)', async () => {
    const streams = await fork(3)
    const [big] = await fork(1)
    const name = 'starve'
    await resource.del('starve:stop', `${name}:inside`, `${name}:max`, `${name}:entries`)
    // 3 processes × 2 holders of 1 permit each, back to back: some permit is always held.
    const stream = streams.map((worker) =>
      ask<ContendReply>(
        worker,
        {
          op: 'contend',
          name,
          permits: 3,
          holders: 2,
          iterations: 100_000,
          lease: 2_000,
          holdMs: 5,
          stopKey: 'starve:stop',
        },
        120_000,
      ),
    )
    await until(async () => Number(await resource.get(`${name}:entries`)) >= 30, 'the stream to run', 60_000)
    const before = Number(await resource.get(`${name}:entries`))
    const startedAt = performance.now()
    const got = await ask<AcquireReply>(big!, {
      op: 'acquire',
      id: 'big',
      name,
      permits: 3,
      count: 3,
      lease: 2_000,
      wait: 30_000,
    })
    const waitedMs = performance.now() - startedAt
    const streamedWhileWaiting = Number(await resource.get(`${name}:entries`)) - before
    expect(got.tokens).toHaveLength(3)
    expect(Number(await resource.get(`${name}:inside`))).toBe(0) // nobody of the stream inside with it
    await ask(big!, { op: 'release', id: 'big' })
    await until(
      async () => Number(await resource.get(`${name}:entries`)) > before + streamedWhileWaiting + 10,
      'the stream to go on after the big holder',
      30_000,
    )
    await resource.set('starve:stop', '1')
    const results = await Promise.all(stream)
    expect(results.flatMap((r) => r.errors)).toEqual([])
    console.log(
      `[semaphore starve] acquire(3) in after ${waitedMs.toFixed(0)} ms; ${streamedWhileWaiting} acquire(1) entered meanwhile (6 holders were ahead or in)`,
    )
  }, 120_000)

  it('a renewal racing a release never resurrects a permit (redis-semaphore #205, #206): 2 processes × 150 rounds', async () => {
    const racers = await fork(2)
    const name = 'race'
    const results = await Promise.all(
      racers.map((worker) =>
        ask<{ lost: number }>(worker, { op: 'race-release', name, rounds: 150, lease: 150 }, 120_000),
      ),
    )
    console.log(
      `[semaphore race] releases reported lost (paused past the lease): ${results.map((r) => r.lost).join(', ')}`,
    )
    expect(await held(name)).toBe(0)
    await sleep(300) // several leases: a renewal landing late would show as a member now
    expect(await held(name)).toBe(0)
    // And a permit is free at once: no ghost holds it.
    const permit = await locks.semaphore(name, { permits: 1 }).tryAcquire()
    expect(permit).toBeDefined()
    await permit!.release()
  }, 150_000)

  it('scores come from the server clock: processes whose clocks are 10 s ahead and behind share one permit correctly', async () => {
    const [ahead, behind] = await Promise.all([
      fork(1, {}, 10_000).then((w) => w[0]!),
      fork(1, {}, -10_000).then((w) => w[0]!),
    ])
    const name = 'clock'
    await resource.del(`${name}:inside`, `${name}:max`, `${name}:entries`)
    const lease = 3_000
    const got = await ask<AcquireReply>(ahead, { op: 'acquire', id: 'x', name, permits: 1, count: 1, lease, wait: 0 })
    expect(Math.abs(got.at - Date.now() - 10_000)).toBeLessThan(2_000) // its clock is really 10 s ahead
    const [seconds, micros] = await admin.time()
    const serverNow = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000)
    const [, score] = await admin.zrange(keysOf(name).holders, '0', '0', 'WITHSCORES')
    // The permit's expiry is the server's now + lease, not the client's (which would be 10 s off).
    expect(Number(score) - serverNow).toBeGreaterThan(0)
    expect(Number(score) - serverNow).toBeLessThanOrEqual(lease)
    // The process 10 s behind does not see the permit as expired, nor the one ahead see its own as alive past it.
    const behindTry = ask(behind, { op: 'acquire', id: 'y', name, permits: 1, count: 1, lease, wait: 0 })
    await expect(behindTry).rejects.toThrow(/LockBusyError|held by another owner/)
    await ask(ahead, { op: 'release', id: 'x' })
    // Both contend: never two inside.
    const results = await Promise.all(
      [ahead, behind].map((worker) =>
        ask<ContendReply>(worker, { op: 'contend', name, permits: 1, holders: 3, iterations: 15, lease }, 120_000),
      ),
    )
    expect(results.flatMap((r) => r.errors)).toEqual([])
    expect(Number(await resource.get(`${name}:max`))).toBe(1)
    expect(Number(await resource.get(`${name}:entries`))).toBe(2 * 3 * 15)
  }, 120_000)

  it('a connection reset mid-acquire (the script ran, its reply never arrived) leaves no orphan permit (Curator 315, 462)', async () => {
    const proxy = await startResetProxy(server.port)
    try {
      for (const resend of [false, true]) {
        const name = `reset-${resend}`
        const [worker] = await fork(1, { port: proxy.port, resend })
        // Warm up: the script is loaded, the connection probed, so the next reply is the acquire's.
        await ask(worker!, { op: 'acquire', id: 'warm', name, permits: 3, count: 1, lease: 10_000, wait: 0 })
        await ask(worker!, { op: 'release', id: 'warm' })
        const counterBefore = await admin.get(keysOf(name).counter)
        proxy.armResetOnReply()
        const outcome = await ask<AcquireReply>(worker!, {
          op: 'acquire',
          id: 'r',
          name,
          permits: 3,
          count: 2,
          lease: 10_000,
          wait: 0,
        }).then(
          (reply) => ({ held: true as const, reply }),
          (error: Error) => ({ held: false as const, error: error.message }),
        )
        expect(await admin.get(keysOf(name).counter)).not.toBe(counterBefore) // the script did run on the server
        // An orphan would stay for the whole 10 s lease; the abandoned attempt's release is queued behind it.
        await until(async () => (await held(name)) === (outcome.held ? 2 : 0), 'no orphan permit', 5_000)
        await sleep(300)
        expect(await held(name)).toBe(outcome.held ? 2 : 0)
        if (outcome.held) await ask(worker!, { op: 'release', id: 'r' })
        expect(await held(name)).toBe(0)
        console.log(`[semaphore reset] resend ${resend}: ${outcome.held ? 'held after the replay' : outcome.error}`)
      }
      expect(proxy.resets).toBe(2)
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()))
      workers = []
      await proxy.close()
    }
  }, 120_000)

  it('a SIGKILLed waiter at the head of the line stops blocking the waiter behind it within one lease + 2 beats', async () => {
    const [doomed, patient] = await fork(2)
    const name = 'dead-waiter'
    const lease = 1_500
    const beatMs = lease / 3 // a waiter's attempts (its heartbeats) are at most this far apart
    const holder = await locks.semaphore(name, { permits: 1 }).acquire(1, { lease: '20s' })
    const waiting = (id: string) => ({ op: 'acquire' as const, id, name, permits: 1, count: 1, lease, wait: 60_000 })
    void ask(doomed!, waiting('d')).catch(() => {})
    await until(async () => (await inLine(name)) === 1, 'the doomed waiter in line', 30_000)
    const [doomedOwner] = await admin.zrange(keysOf(name).queue, '0', '0')
    const served = ask<AcquireReply>(patient!, waiting('p'))
    await until(async () => (await inLine(name)) === 2, 'the patient waiter in line', 30_000)
    doomed!.kill('SIGKILL')
    const releasedAt = Date.now() // the same wall clock as the worker's `at` (this machine's)
    await holder.release()
    expect((await admin.zrange(keysOf(name).queue, '0', '0'))[0]).toBe(doomedOwner) // the dead one heads the line
    const got = await served
    const afterMs = got.at - releasedAt // when the worker had it, not when its reply arrived here
    console.log(
      `[semaphore dead waiter] the live waiter in ${afterMs.toFixed(0)} ms (${(afterMs / lease).toFixed(2)} leases) after the release, behind a dead head`,
    )
    expect(got.tokens).toHaveLength(1)
    // One lease for the dead waiter's last beat to run out, one beat for the live waiter's
    // next attempt to come due, one beat of slack for a loaded machine (timers, IPC).
    expect(afterMs).toBeLessThan(lease + 2 * beatMs)
    expect(await inLine(name)).toBe(0) // the dead waiter was dropped from the line
    await ask(patient!, { op: 'release', id: 'p' })
    expect(await held(name)).toBe(0)
  }, 90_000)

  it('8 processes × 50 holders: never more than N inside, counted by the protected resource itself', async () => {
    const contenders = await fork(8)
    const name = 'fleet'
    const permits = 5
    await resource.del(`${name}:inside`, `${name}:max`, `${name}:entries`)
    const results = await Promise.all(
      contenders.map((worker) =>
        ask<ContendReply>(
          worker,
          { op: 'contend', name, permits, holders: 50, iterations: 2, lease: 5_000, holdMs: 3 },
          170_000,
        ),
      ),
    )
    expect(results.flatMap((r) => r.errors)).toEqual([])
    const max = Number(await resource.get(`${name}:max`))
    expect(max).toBeLessThanOrEqual(permits)
    expect(max).toBeGreaterThanOrEqual(2) // it did run holders side by side
    expect(Number(await resource.get(`${name}:entries`))).toBe(8 * 50 * 2)
    expect(Number(await resource.get(`${name}:inside`))).toBe(0)
    expect(await held(name)).toBe(0)
    expect(await inLine(name)).toBe(0)
    console.log(`[semaphore fleet] 800 entries, at most ${max} inside at once (permits ${permits})`)
  }, 180_000)
})
