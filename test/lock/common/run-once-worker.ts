/**
 * One app instance for the cross-process runOnce tests: a Redis-backed and a
 * PostgreSQL-backed `Locks`, each firing the same job on the same schedule. Every run
 * records itself in PostgreSQL (`runs`), with the claim time read from the claim store.
 *
 * env: REDIS_PORT, PG_DATABASE, PG_SCHEMA (the backend's tables).
 * Requests: `{ start: StartSchedule }` → resolves once the schedules are set;
 * `'stop'` → stops them. A run whose `runs.id` is 1 for its store hangs when `hangFirst` (to be SIGKILLed).
 */
import { Redis } from 'ioredis'
import { createLocks, schedule, type Schedule } from '../../../src/lock/index.js'
import { claimKey } from '../../../src/lock/redis/claims.js'
import { pgPool } from '../../support/databases.js'
import { sleep } from '../../support/timing.js'
import { serveRequests } from '../../support/worker-side.js'

export interface StartSchedule {
  job: string
  everyMs: number
  startAt: number
  ticks: number
  /** This instance's timer is late by this much (it runs runOnce this long after each tick). */
  offsetMs: number
  lockAtMostFor: number
  lockAtLeastFor: number
  hangFirst: boolean
}

const NAMESPACE = 'run-once-test'
const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT) })
const pool = await pgPool(process.env.PG_DATABASE!, { max: 6 })
pool.on('error', () => {})
const schema = process.env.PG_SCHEMA!
const stores = {
  redis: createLocks({ redis, namespace: NAMESPACE }),
  postgres: createLocks({ postgres: { pool, schema }, namespace: NAMESPACE }),
}
const running: Schedule[] = []

async function claimedAt(store: keyof typeof stores, job: string): Promise<string> {
  if (store === 'redis') return String((await redis.get(claimKey(NAMESPACE, job)))?.split('|')[1])
  const { rows } = await pool.query(
    `SELECT (extract(epoch FROM locked_at) * 1000)::bigint AS at FROM "${schema}".run_once WHERE name = $1`,
    [job],
  )
  return String(rows[0]?.at)
}

async function start(plan: StartSchedule): Promise<void> {
  for (const store of Object.keys(stores) as (keyof typeof stores)[]) {
    running.push(
      await schedule(
        async (tick) => {
          if (plan.offsetMs > 0) await sleep(plan.offsetMs)
          await stores[store].runOnce(
            plan.job,
            async () => {
              const at = await claimedAt(store, plan.job)
              const { rows } = await pool.query(
                'INSERT INTO runs (store, job, tick_at, claimed_at, pid) VALUES ($1, $2, $3, $4, $5) RETURNING (SELECT count(*) FROM runs WHERE store = $1 AND job = $2)::int AS before',
                [store, plan.job, tick.at.getTime(), at, process.pid],
              )
              if (plan.hangFirst && rows[0].before === 0) await new Promise(() => {}) // the parent SIGKILLs us here
            },
            { lockAtMostFor: plan.lockAtMostFor, lockAtLeastFor: plan.lockAtLeastFor },
          )
        },
        {
          every: plan.everyMs,
          startAt: plan.startAt,
          maxTicks: plan.ticks,
          onError: (error) => console.error(`[${store}] tick failed:`, error),
        },
      ),
    )
  }
}

serveRequests(async (message: { start: StartSchedule } | 'stop') => {
  if (message === 'stop') {
    await Promise.all(running.splice(0).map((s) => s.stop()))
    return null
  }
  await start(message.start)
  return null
})
process.once('disconnect', () => {
  redis.disconnect()
  void pool.end()
})
