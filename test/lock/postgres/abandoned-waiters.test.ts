/**
 * A PostgreSQL waiter that gives up (its signal aborts, or close()) destroys its
 * connection, but a server session blocked in a lock wait does not notice a closed
 * socket by itself: it went on waiting until `lock_timeout` (the caller's whole `wait`),
 * holding a server connection, and took the lock for an instant when it came free.
 * Many waiters giving up could so exhaust `max_connections`. Counted in pg_locks.
 */
import type { Pool } from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { createPostgresDatabase, postgresAvailable, type TestDatabase } from '../../support/databases.js'
import { until } from '../../support/timing.js'

describe.skipIf(!postgresAvailable)('PostgreSQL: waiters that give up', () => {
  let db: TestDatabase
  let pool: Pool
  let admin: Pool
  let serverChecksClients = false
  const opened: Locks<unknown>[] = []
  /** Server sessions of this database waiting (not granted) for an advisory lock. */
  const waitingSessions = async () =>
    (
      await admin.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
      )
    ).rows[0]!.n

  beforeAll(async () => {
    db = await createPostgresDatabase('pgabandon')
    pool = await db.pool({ max: 8 })
    admin = await db.pool({ max: 1 })
    // client_connection_check_interval (PostgreSQL 14+) is what lets the server notice.
    serverChecksClients =
      (await admin.query("SELECT 1 FROM pg_settings WHERE name = 'client_connection_check_interval'")).rowCount === 1
  })
  afterAll(async () => {
    await Promise.all(opened.map((locks) => locks.close()))
    await db?.drop()
  })

  it.each(['transaction', 'session'] as const)(
    '%s mode: an aborted wait leaves no server session waiting for the lock',
    async (mode) => {
      if (!serverChecksClients)
        return void console.warn('skipped: this PostgreSQL has no client_connection_check_interval (before 14)')
      // One Locks per waiter, as four processes would be: one Locks lets one waiter per key wait on the store.
      const [locks, ...others] = Array.from({ length: 5 }, () => createLocks({ postgres: { pool, mode } }))
      opened.push(locks as Locks<unknown>, ...(others as Locks<unknown>[]))
      const key = `abandoned-${mode}`
      const holder = await locks!.acquire(key)
      const giveUp = new AbortController()
      const waiters = others.map((other) =>
        other.acquire(key, { wait: '60s', signal: giveUp.signal }).then(
          () => 'acquired',
          (error: unknown) => error,
        ),
      )
      await until(async () => (await waitingSessions()) === 4, 'four sessions waiting in the server')
      giveUp.abort(new Error('the caller gave up'))
      for (const outcome of await Promise.all(waiters)) expect((outcome as Error).message).toBe('the caller gave up')
      // The holder still holds: without the fix the four sessions wait on for the whole 60 s.
      await until(async () => (await waitingSessions()) === 0, 'the abandoned sessions to stop waiting', 10_000)
      await holder.release()
    },
  )
})
