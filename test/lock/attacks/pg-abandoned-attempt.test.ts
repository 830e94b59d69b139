/**
 * PostgreSQL semaphore: an attempt that gets no answer in `postgres.timeout` because it is
 * still running (here: queued behind another transaction holding the semaphore's advisory
 * lock) is given up by the caller, whose release runs at once on another pool connection and
 * finds nothing yet. When the attempt then commits, the permit it took must be given back
 * too, not left to its lease with nobody holding it (Curator 315, 462's orphan, by a slow
 * statement rather than a reset). The pool is wrapped only to see when those releases ended,
 * so that the attempt is let through after them, every run.
 */
import type { Pool, PoolClient } from 'pg'
import { describe, expect, it } from 'vitest'
import { createLocks, LockBackendError } from '../../../src/index.js'
import { createPostgresDatabase, postgresAvailable, type TestDatabase } from '../../support/databases.js'
import { until } from '../../support/timing.js'

const RELEASE = /^\s*WITH left_line AS \(DELETE/
const ATTEMPT = /semaphore_acquire\(/

/** The pool, counting the semaphore releases and attempts that have ended. */
function countingReleases(pool: Pool): { pool: Pool; ended: () => number; attempts: () => number } {
  let ended = 0
  let attempts = 0
  const count = (query: Promise<unknown>, add: () => void) => void query.then(add, add)
  const wrapped = new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop !== 'query') return Reflect.get(target, prop, receiver) as unknown
      return (sql: string, values?: unknown[]) => {
        const query = target.query(sql, values)
        if (RELEASE.test(sql)) count(query, () => ended++)
        if (ATTEMPT.test(sql)) count(query, () => attempts++)
        return query
      }
    },
  })
  return { pool: wrapped, ended: () => ended, attempts: () => attempts }
}

describe.skipIf(!postgresAvailable)('PostgreSQL semaphore: an attempt still running when given up', () => {
  it('leaves no orphan permit once it commits after its releases: another holder gets the one permit well within its 10 s lease', async () => {
    const db: TestDatabase = await createPostgresDatabase('sem_abandoned')
    const pool: Pool = await db.pool({ max: 10 })
    const releases = countingReleases(pool)
    const locks = createLocks({ postgres: { pool: releases.pool, timeout: 300 }, namespace: 'adv' })
    const sem = locks.semaphore('s', { permits: 1, lease: 10_000 })
    const permits = async () =>
      Number(
        (await pool.query(`SELECT count(*) AS n FROM "stampede_guard".semaphore_permits WHERE name = 's'`)).rows[0].n,
      )
    let blocker: PoolClient | undefined
    try {
      await (await sem.acquire()).release() // tables created
      const before = releases.ended()
      const attemptsBefore = releases.attempts()
      blocker = await pool.connect()
      await blocker.query('BEGIN')
      await blocker.query(`SELECT pg_advisory_xact_lock(hashtextextended('adv' || chr(1) || 's', 2023))`)
      await expect(sem.acquire(1, { wait: 5_000 })).rejects.toBeInstanceOf(LockBackendError)
      // The caller's releases (the attempt's own and the wait's) ran, finding nothing yet.
      await until(() => releases.ended() >= before + 2, 'the releases of the abandoned attempt', 3_000)
      await blocker.query('COMMIT') // the attempt, queued behind it, now runs and commits
      blocker.release()
      blocker = undefined
      await until(() => releases.attempts() > attemptsBefore, 'the abandoned attempt to end', 3_000)
      // Before: 1 permit, nobody holding it, for its 10 s lease.
      await until(async () => (await permits()) === 0, 'the abandoned attempt to give back its permit', 3_000)
      const next = await sem.acquire(1, { wait: 1_000 })
      await next.release()
    } finally {
      if (blocker) {
        await blocker.query('ROLLBACK').catch(() => {})
        blocker.release()
      }
      await locks.close()
      await db.drop()
    }
  }, 30_000)
})
