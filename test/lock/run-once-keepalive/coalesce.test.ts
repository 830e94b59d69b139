/**
 * `locks.coalesce(name, fn)` on Redis: runs now, then once more after the last trigger
 * that came while it ran, never two at once, in one process and across three.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { InvalidArgumentError, LocksClosedError } from '../../../src/errors.js'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { abortReason, gate, sleep, until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'

const WORKER = new URL('./coalesce-worker.ts', import.meta.url)

describe('coalesce (Redis)', () => {
  const redis = useRedisServer()
  let count = 0
  const fresh = () => `co-${++count}`
  const opened: Locks[] = []
  const newLocks = () => {
    const locks = createLocks({ redis: redis.server().client(), namespace: 'co', lease: '1s' })
    opened.push(locks)
    return locks
  }
  const workers: Worker[] = []
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()))
    await Promise.all(workers.splice(0).map((w) => w.stop()))
  })

  it('five triggers during a run give exactly one run more; a trigger when idle runs at once', async () => {
    const name = fresh()
    const locks = newLocks()
    const release = gate()
    const runs: number[] = []
    const first = locks.coalesce(name, async ({ run }) => {
      runs.push(run)
      if (run === 0) await release.promise
      return run
    })
    await until(() => runs.length === 1, 'the first run')
    const others = await Promise.all(Array.from({ length: 5 }, () => newLocks().coalesce(name, () => 'other')))
    expect(others).toEqual(Array.from({ length: 5 }, () => ({ ran: false })))
    release.open()
    await expect(first).resolves.toEqual({ ran: true, runs: 2, value: 1 })
    expect(runs).toEqual([0, 1])
    await expect(locks.coalesce(name, () => 'idle')).resolves.toEqual({ ran: true, runs: 1, value: 'idle' })
  })

  it('a run that throws: the next run still happens, and the call settles like the last run', async () => {
    const name = fresh()
    const locks = newLocks()
    const release = gate()
    const first = locks.coalesce(name, async ({ run }) => {
      if (run === 0) {
        await release.promise
        throw new Error('run 0 failed')
      }
      return 'recovered'
    })
    await sleep(50)
    await newLocks().coalesce(name, () => {})
    release.open()
    await expect(first).resolves.toEqual({ ran: true, runs: 2, value: 'recovered' })
    await expect(locks.coalesce(name, () => Promise.reject(new Error('alone')))).rejects.toThrow('alone')
  })

  it('three processes triggering at random: never two runs at once, and a run starts after the last trigger', async () => {
    const name = fresh()
    const admin = redis.admin()
    await admin.del('co:inside', 'co:overlaps', 'co:runs', 'co:triggers')
    workers.push(
      ...(await Promise.all(
        Array.from({ length: 3 }, () => forkWorker(WORKER, { env: { REDIS_URL: redis.server().url } })),
      )),
    )
    const results = await Promise.all(
      workers.map(async (worker, w) => {
        const outcomes: { ran: boolean }[] = []
        for (let i = 0; i < 8; i++) {
          await sleep(10 + ((w * 37 + i * 53) % 60))
          outcomes.push(await worker.request({ op: 'trigger', name, runMs: 40 }))
        }
        return outcomes
      }),
    )
    const triggers = (await admin.lrange('co:triggers', 0, -1)).map(Number)
    const runs = (await admin.lrange('co:runs', 0, -1)).map(Number)
    const ran = results.flat().filter((r) => r.ran).length
    console.log(`[coalesce] ${triggers.length} triggers from 3 processes → ${runs.length} runs by ${ran} runner calls`)
    expect(Number(await admin.get('co:overlaps'))).toBe(0)
    expect(runs.length).toBeLessThan(triggers.length)
    expect(Math.max(...runs)).toBeGreaterThanOrEqual(Math.max(...triggers))
  }, 60_000)

  it('close() during a run: its signal aborts, no run follows on the closed instance, the claim is freed, and the pending trigger is kept for the next trigger', async () => {
    const name = fresh()
    const locks = newLocks()
    const release = gate()
    const runs: number[] = []
    let reason: unknown
    const first = locks.coalesce(name, async ({ run, signal }) => {
      runs.push(run)
      reason = await abortReason(signal, 'the run to be told to stop', 5_000)
      await release.promise
      return run
    })
    await until(() => runs.length === 1, 'the first run')
    await expect(newLocks().coalesce(name, () => 'other')).resolves.toEqual({ ran: false })
    await locks.close()
    await until(() => reason !== undefined, 'the abort')
    expect(reason).toMatchObject({ name: 'LockLostError' })
    release.open()
    await expect(first).resolves.toEqual({ ran: true, runs: 1, value: 0 })
    expect(runs).toEqual([0])
    expect(await redis.admin().exists(`co:{c:${name}}`)).toBe(0)
    expect(await redis.admin().exists(`co:{c:${name}}:pending`)).toBe(1)
    await expect(newLocks().coalesce(name, () => 'next')).resolves.toEqual({ ran: true, runs: 1, value: 'next' })
  })

  it('bad input is a typed error naming the argument; other backends refuse it', async () => {
    const locks = newLocks()
    await expect(locks.coalesce('', () => {})).rejects.toMatchObject({ argument: 'name' })
    await expect(locks.coalesce('n', 5 as never)).rejects.toMatchObject({ argument: 'fn' })
    await expect(locks.coalesce('n', () => {}, { lease: 2 })).rejects.toMatchObject({ argument: 'lease' })
    await expect(locks.coalesce('n', () => {}, { every: 1 } as never)).rejects.toBeInstanceOf(InvalidArgumentError)
    const redlock = createLocks({ redlock: [redis.server().client()] })
    opened.push(redlock)
    await expect(redlock.coalesce('n', () => {})).rejects.toMatchObject({ argument: 'coalesce' })
    await locks.close()
    await expect(locks.coalesce('n', () => {})).rejects.toBeInstanceOf(LocksClosedError)
  })
})
