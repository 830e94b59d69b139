/**
 * locks.runOnce (ShedLock semantics) on each claim store (Redis, PostgreSQL, MariaDB), and
 * the schedule() helper. Cross-process behaviour is in run-once.cross-process.test.ts.
 */
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLocks,
  InvalidArgumentError,
  LockBackendError,
  RedisUnavailableError,
  schedule,
  type LockBackend,
  type Locks,
} from '../../../src/lock/index.js'
import {
  createMariaDatabase,
  createPostgresDatabase,
  mariadbAvailable,
  postgresAvailable,
  type TestDatabase,
  type TestMariaDatabase,
} from '../../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { freePort } from '../../support/managed-process.js'
import { gate, until } from '../../support/timing.js'

type Store = 'redis' | 'postgres' | 'mysql'
const stores: Store[] = [
  ...(redisAvailable ? (['redis'] as const) : []),
  ...(postgresAvailable ? (['postgres'] as const) : []),
  ...(mariadbAvailable ? (['mysql'] as const) : []),
]

describe.skipIf(stores.length === 0)('runOnce', () => {
  let redisServer: RedisServer | undefined
  let redis: Redis | undefined
  let pg: TestDatabase | undefined
  let maria: TestMariaDatabase | undefined
  const opened: Locks<unknown>[] = []
  const locksOn = async (store: Store) => {
    const locks =
      store === 'redis'
        ? createLocks({ redis: redis!, namespace: 'run-once' })
        : store === 'postgres'
          ? createLocks({ postgres: await pg!.pool(), namespace: 'run-once' })
          : createLocks({ mysql: await maria!.pool(), namespace: 'run-once' })
    opened.push(locks as Locks<unknown>)
    return locks
  }

  beforeAll(async () => {
    if (redisAvailable) {
      redisServer = await startRedis()
      redis = redisServer.client()
    }
    if (postgresAvailable) pg = await createPostgresDatabase('runonce_unit')
    if (mariadbAvailable) maria = await createMariaDatabase('runonce_unit')
  })
  afterAll(async () => {
    await Promise.all(opened.map((locks) => locks.close()))
    await Promise.all([redisServer?.stop(), pg?.drop(), maria?.drop()])
  })

  it.each(stores)(
    '%s: of 8 instances firing one tick at once, exactly one runs; the others skip at once, without waiting',
    async (store) => {
      const instances = await Promise.all(Array.from({ length: 8 }, () => locksOn(store)))
      const release = gate()
      let runs = 0
      const results = instances.map((locks) =>
        locks.runOnce(
          'tick-once',
          async () => {
            runs++
            await release.promise
            return 'done'
          },
          { lockAtMostFor: '1m' },
        ),
      )
      // every skipper answers while the runner is still running: none waited for it
      await until(() => runs === 1, 'the runner to start')
      const settled: unknown[] = []
      results.forEach((result) => void result.then((r) => settled.push(r)))
      await until(() => settled.length === 7, 'the 7 skippers to answer while the runner still runs')
      expect(settled).toEqual(Array.from({ length: 7 }, () => ({ ran: false })))
      release.open()
      expect(await Promise.all(results)).toContainEqual({ ran: true, value: 'done' })
      expect(runs).toBe(1)
    },
  )

  it.each(stores)(
    '%s: lockAtLeastFor keeps the claim after a fast run; after it, the job runs again; its error propagates to the runner',
    async (store) => {
      const locks = await locksOn(store)
      const options = { lockAtMostFor: '1m', lockAtLeastFor: 600 }
      const started = performance.now()
      expect(await locks.runOnce('fast', () => 1, options)).toEqual({ ran: true, value: 1 })
      expect(await locks.runOnce('fast', () => 2, options)).toEqual({ ran: false })
      await until(
        async () => (await locks.runOnce('fast', () => 3, options)).ran,
        'the claim to end after lockAtLeastFor',
        10_000,
      )
      // by the store's clock; this process's clock can only differ by rate, not offset
      expect(performance.now() - started).toBeGreaterThanOrEqual(600 - 10)

      const boom = new Error('job failed')
      await expect(
        locks.runOnce('failing', () => Promise.reject(boom), { lockAtMostFor: '1m', lockAtLeastFor: '1m' }),
      ).rejects.toBe(boom)
      // a failed run still counts for this tick: nobody reruns it at once
      expect(await locks.runOnce('failing', () => 'again', { lockAtMostFor: '1m' })).toEqual({ ran: false })
    },
  )

  it.each(stores)(
    '%s: an expired claim (lockAtMostFor passed) lets the next instance in, and the overrunning job sees its signal abort',
    async (store) => {
      const [a, b] = [await locksOn(store), await locksOn(store)]
      const release = gate()
      let aborted: unknown
      let started = false
      const long = a.runOnce(
        'overrun',
        async ({ signal }) => {
          started = true
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
          aborted = signal.reason
          await release.promise
        },
        { lockAtMostFor: 500 },
      )
      await until(() => started, 'the first instance to start the job')
      await until(
        async () => (await b.runOnce('overrun', () => 'second', { lockAtMostFor: '1m', lockAtLeastFor: '1m' })).ran,
        'the claim to expire',
        10_000,
      )
      expect((aborted as Error | undefined)?.name).toBe('LockLostError')
      release.open()
      expect((await long).ran).toBe(true)
      // the overrunning instance's finish did not end the second instance's claim
      expect(await a.runOnce('overrun', () => 'third', { lockAtMostFor: '1m' })).toEqual({ ran: false })
    },
  )

  it('bad input is InvalidArgumentError naming it; a backend without claims says so; PostgreSQL down is LockBackendError, Redis down RedisUnavailableError; the job does not run', async () => {
    const locks = await locksOn(stores[0]!)
    const cases: [() => Promise<unknown>, string][] = [
      [() => locks.runOnce('', () => 1, { lockAtMostFor: '1m' }), 'name'],
      [() => locks.runOnce('job', 'nope' as never, { lockAtMostFor: '1m' }), 'fn'],
      [() => locks.runOnce('job', () => 1, {} as never), 'lockAtMostFor'],
      [() => locks.runOnce('job', () => 1, { lockAtMostFor: 'soon' }), 'lockAtMostFor'],
      [() => locks.runOnce('job', () => 1, { lockAtMostFor: '1s', lockAtLeastFor: '2s' }), 'lockAtLeastFor'],
      [() => locks.runOnce('job', () => 1, { lockAtMostFor: '1s', every: 5 } as never), 'every'],
    ]
    for (const [call, argument] of cases) {
      const error = await call().catch((e: unknown) => e)
      expect(error, argument).toBeInstanceOf(InvalidArgumentError)
      expect((error as InvalidArgumentError).argument).toBe(argument)
    }
    const noClaims: LockBackend = { name: 'custom', acquire: async () => undefined, close: async () => {} }
    const custom = createLocks({ backend: noClaims })
    const error = await custom.runOnce('job', () => 1, { lockAtMostFor: '1m' }).catch((e: unknown) => e)
    expect((error as InvalidArgumentError).argument).toBe('runOnce')

    if (pg) {
      const down = await pg.pool({ port: await freePort(), connectionTimeoutMillis: 0 })
      const onDown = createLocks({ postgres: { pool: down, timeout: 2_000 }, namespace: 'run-once' })
      let ran = false
      await expect(onDown.runOnce('job', () => (ran = true), { lockAtMostFor: '1m' })).rejects.toBeInstanceOf(
        LockBackendError,
      )
      expect(ran).toBe(false)
    }
    if (redisServer) {
      const doomed = redisServer.client({ maxRetriesPerRequest: 0, retryStrategy: () => null })
      const onDead = createLocks({ redis: doomed, namespace: 'run-once' })
      await doomed.ping()
      doomed.disconnect()
      await until(() => doomed.status === 'end', 'the client to close')
      let ran = false
      await expect(onDead.runOnce('job', () => (ran = true), { lockAtMostFor: '1m' })).rejects.toBeInstanceOf(
        RedisUnavailableError,
      )
      expect(ran).toBe(false)
    }
  })
})

describe('schedule', () => {
  it('fires at whole multiples of `every`, one job at a time (an overlapping tick is skipped and counted), and stops after maxTicks', async () => {
    const ats: number[] = []
    const first = gate()
    const s = await schedule(
      async (tick) => {
        ats.push(tick.at.getTime())
        if (tick.index === 0) await first.promise // keeps running past the next tick
      },
      { every: 200, maxTicks: 4 },
    )
    await until(() => s.stats.overlapped >= 1, 'a tick to fall while the first job still runs')
    first.open()
    await s.done
    expect(ats.every((at) => at % 200 === 0)).toBe(true)
    expect(s.stats.ran + s.stats.overlapped).toBe(4)
    expect(s.next).toBeUndefined()
  })

  it('runs on a cron expression (cron-parser, with seconds) and stop() aborts the running tick and waits for it', async () => {
    let signal: AbortSignal | undefined
    const s = await schedule(
      async (tick) => {
        signal = tick.signal
        await new Promise<void>((resolve) => tick.signal.addEventListener('abort', () => resolve(), { once: true }))
      },
      { cron: '* * * * * *' },
    )
    expect(s.next!.getTime() % 1_000).toBe(0)
    await until(() => signal !== undefined, 'the first cron tick', 5_000)
    await s.stop()
    expect(signal!.aborted).toBe(true)
    expect(s.next).toBeUndefined()
  })

  it('a job error goes to onError and the schedule goes on; bad options are InvalidArgumentError', async () => {
    const errors: unknown[] = []
    const s = await schedule(
      () => {
        throw new Error('tick failed')
      },
      { every: 50, maxTicks: 2, onError: (error) => errors.push(error) },
    )
    await s.done
    expect(errors).toHaveLength(2)
    expect(s.stats.failed).toBe(2)

    const bad: [Parameters<typeof schedule>[1], string][] = [
      [{}, 'every'],
      [{ every: 10, cron: '* * * * *' }, 'every'],
      [{ every: '-1s' }, 'every'],
      [{ cron: 'every tuesday' }, 'cron'],
      [{ every: 10, maxTicks: 0 }, 'maxTicks'],
      [{ every: 10, startAt: Number.NaN }, 'startAt'],
      [{ every: 10, at: 5 } as never, 'at'],
    ]
    for (const [options, argument] of bad) {
      const error = await schedule(() => {}, options).catch((e: unknown) => e)
      expect(error, argument).toBeInstanceOf(InvalidArgumentError)
      expect((error as InvalidArgumentError).argument).toBe(argument)
    }
  })
})
