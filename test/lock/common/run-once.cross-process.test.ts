/**
 * runOnce across real processes (issue 12, acceptance 4), for the Redis and the
 * PostgreSQL claim store at once: 4 instances fire the same job on the same ticks, one of
 * them 300 ms late, and every run is counted in PostgreSQL.
 */
import type { Pool } from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createPostgresDatabase, postgresAvailable, type TestDatabase } from '../../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'
import type { StartSchedule } from './run-once-worker.js'

interface Run {
  store: string
  tick_at: string
  claimed_at: string
  pid: number
}

describe.skipIf(!redisAvailable || !postgresAvailable)(
  'runOnce across 4 processes (Redis and PostgreSQL claims)',
  () => {
    let redis: RedisServer
    let db: TestDatabase
    let pool: Pool
    let workers: Worker[] = []
    const spawn = async (count: number) => {
      const env = { REDIS_PORT: String(redis.port), PG_DATABASE: db.name, PG_SCHEMA: 'claims' }
      workers = await Promise.all(
        Array.from({ length: count }, () => forkWorker(new URL('./run-once-worker.ts', import.meta.url), { env })),
      )
      return workers
    }
    const runs = async (job: string) =>
      (
        await pool.query<Run>(
          'SELECT store, tick_at::text, claimed_at::text, pid FROM runs WHERE job = $1 ORDER BY id',
          [job],
        )
      ).rows

    beforeAll(async () => {
      ;[redis, db] = await Promise.all([startRedis(), createPostgresDatabase('runonce')])
      pool = await db.pool()
      await pool.query(
        'CREATE TABLE runs (id serial PRIMARY KEY, store text NOT NULL, job text NOT NULL, tick_at bigint NOT NULL, claimed_at bigint NOT NULL, pid int NOT NULL)',
      )
    })
    afterEach(async () => {
      await Promise.all(workers.map((w) => w.stop()))
      workers = []
    })
    afterAll(async () => {
      await Promise.all([redis?.stop(), db?.drop()])
    })

    it('10 ticks fired by 4 instances, one 300 ms late: each tick runs exactly once per store', async () => {
      const everyMs = 2_000
      const ticks = 10
      const instances = await spawn(4)
      // a common first tick far enough ahead for every instance to be scheduled
      const startAt = Math.ceil((Date.now() + 3_000) / everyMs) * everyMs
      const plan = (offsetMs: number): StartSchedule => ({
        job: 'report',
        everyMs,
        startAt,
        ticks,
        offsetMs,
        lockAtMostFor: 30_000,
        lockAtLeastFor: 1_200,
        hangFirst: false,
      })
      await Promise.all(instances.map((worker, i) => worker.request({ start: plan(i === 3 ? 300 : 0) })))
      const expected = Array.from({ length: ticks }, (_, i) => String(startAt + i * everyMs))
      await until(async () => (await runs('report')).length >= 2 * ticks, 'every tick to run', everyMs * ticks + 30_000)
      // the last tick's late instance has had its chance too (one interval after the last tick)
      await until(
        () => Date.now() > startAt + ticks * everyMs + 500,
        'the late instance to pass the last tick',
        everyMs * 3,
      )
      const all = await runs('report')
      for (const store of ['redis', 'postgres']) {
        expect(
          all.filter((r) => r.store === store).map((r) => r.tick_at),
          store,
        ).toEqual(expected)
      }
      // several instances took part (the claim is not stuck on one)
      expect(new Set(all.map((r) => r.pid)).size).toBeGreaterThan(1)
    }, 120_000)

    it("an instance SIGKILLed mid-run: the job runs again only after lockAtMostFor, by the store's clock", async () => {
      const lockAtMostFor = 3_000
      const instances = await spawn(4)
      const everyMs = 250
      const startAt = Math.ceil((Date.now() + 2_000) / everyMs) * everyMs
      const plan: StartSchedule = {
        job: 'crash',
        everyMs,
        startAt,
        ticks: 200,
        offsetMs: 0,
        lockAtMostFor,
        lockAtLeastFor: 0,
        hangFirst: true,
      }
      await Promise.all(instances.map((worker) => worker.request({ start: plan })))
      await until(
        async () => new Set((await runs('crash')).map((r) => r.store)).size === 2,
        'both stores to start a first run',
        30_000,
      )
      const first = await runs('crash')
      for (const pid of new Set(first.map((r) => r.pid))) instances.find((w) => w.pid === pid)!.kill('SIGKILL')
      await until(
        async () =>
          (await runs('crash')).filter((r) => r.store === 'redis').length >= 2 &&
          (await runs('crash')).filter((r) => r.store === 'postgres').length >= 2,
        'the job to run again in both stores',
        30_000,
      )
      const after = await runs('crash')
      for (const store of ['redis', 'postgres']) {
        const [crashed, next] = after.filter((r) => r.store === store)
        // store time between the crashed run's claim and the next claim
        expect(Number(next!.claimed_at) - Number(crashed!.claimed_at), store).toBeGreaterThanOrEqual(lockAtMostFor)
        // ...and no later than a few ticks after it (the survivors keep firing every 250 ms)
        expect(Number(next!.claimed_at) - Number(crashed!.claimed_at), store).toBeLessThan(lockAtMostFor + 5_000)
        expect(next!.pid).not.toBe(crashed!.pid)
      }
    }, 120_000)
  },
)
