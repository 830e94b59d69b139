/**
 * PostgreSQL locks behind a real PgBouncer in transaction mode (started by the test on a
 * free port, in front of the machine's PostgreSQL): the default transaction-scoped lock
 * stays correct; a session lock is shown to be unsafe there; the backend's session mode
 * warns, and refuses once it sees a server session that is not its own.
 */
import pg from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, LockBackendError } from '../../../src/lock/index.js'
import { createPostgresBackend } from '../../../src/lock/postgres/backend.js'
import { createPostgresDatabase, POSTGRES, postgresAvailable, type TestDatabase } from '../../support/databases.js'
import { pgbouncerAvailable, startPgBouncer, type PgBouncer } from '../../support/pgbouncer.js'

describe.skipIf(!postgresAvailable || !pgbouncerAvailable)(
  'PostgreSQL locks behind PgBouncer (pool_mode = transaction)',
  () => {
    let db: TestDatabase
    const bouncers: PgBouncer[] = []
    const clients: pg.Client[] = []
    const bouncer = async (poolSize: number) => {
      const started = await startPgBouncer({ poolMode: 'transaction', poolSize })
      bouncers.push(started)
      return started
    }
    const clientThrough = async (port: number) => {
      const client = new pg.Client({ host: POSTGRES.host, port, user: POSTGRES.user, database: db.name })
      client.on('error', () => {})
      clients.push(client)
      await client.connect()
      return client
    }

    beforeAll(async () => {
      db = await createPostgresDatabase('pgbouncer')
    })
    afterEach(async () => {
      await Promise.all(clients.splice(0).map((client) => client.end().catch(() => {})))
    })
    afterAll(async () => {
      await Promise.all(bouncers.map((b) => b.stop()))
      await db?.drop()
    })

    it('the default transaction-scoped lock stays correct: 60 read-modify-writes through 10 client connections on 2 server connections lose nothing, and never overlap', async () => {
      const { port } = await bouncer(2)
      const pool = await db.pool({ port, max: 10 })
      await pool.query('CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL)')
      await pool.query('INSERT INTO counter VALUES (1, 0)')
      const locks = createLocks<pg.PoolClient | undefined>({ backend: createPostgresBackend({ pool }) as never })
      let inside = 0
      let most = 0
      await Promise.all(
        Array.from({ length: 60 }, () =>
          locks.withLock(
            'counter',
            async ({ resource }) => {
              most = Math.max(most, ++inside)
              const { rows } = await resource!.query('SELECT n FROM counter WHERE id = 1')
              await resource!.query('SELECT pg_sleep(0.005)') // widen the read-modify-write window
              await resource!.query('UPDATE counter SET n = $1 WHERE id = 1', [rows[0].n + 1])
              inside--
            },
            { wait: '60s' },
          ),
        ),
      )
      expect(most).toBe(1)
      expect((await pool.query('SELECT n FROM counter')).rows[0].n).toBe(60)
      await locks.close()
    })

    it('a session lock through it is unsafe: two clients both "get" the same lock, and it outlives the client that took it', async () => {
      const { port } = await bouncer(1)
      const a = await clientThrough(port)
      const b = await clientThrough(port)
      expect((await a.query('SELECT pg_try_advisory_lock(4242) AS got')).rows[0].got).toBe(true)
      // b's statement runs on the same server session, where session locks stack: b "holds" it too
      expect((await b.query('SELECT pg_try_advisory_lock(4242) AS got')).rows[0].got).toBe(true)
      await a.end()
      await b.end()
      // both clients are gone, yet the server session still holds the lock for whoever comes next
      const c = await clientThrough(port)
      expect(
        (
          await c.query(
            "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted",
          )
        ).rows[0].n,
      ).toBe(1)
      await c.query('SELECT pg_advisory_unlock_all()')
    })

    it("the backend's session mode warns that a pooler sits in between, and refuses a server session that already holds a lock it did not take", async () => {
      const { port } = await bouncer(1)
      const pool = await db.pool({ port, max: 4 })
      const warnings: Error[] = []
      const onWarning = (warning: Error) => {
        if ((warning as { code?: string }).code === 'SG_PG_SESSION_BEHIND_PROXY') warnings.push(warning)
      }
      process.on('warning', onWarning)
      try {
        const locks = createLocks({ backend: createPostgresBackend({ pool, mode: 'session' }) })
        const first = await locks.acquire('job')
        await new Promise((resolve) => setImmediate(resolve)) // warnings are emitted on the next tick
        expect(warnings).toHaveLength(1)
        expect(warnings[0]!.message).toMatch(/pooler/)
        // Without the check, this would be a second holder (as the raw test above shows).
        const second = await locks.tryAcquire('job').catch((e: unknown) => e)
        expect(second).toBeInstanceOf(LockBackendError)
        expect((second as Error).message).toMatch(/session mode refused/)
        await first.release()
        await locks.close()
      } finally {
        process.off('warning', onWarning)
      }
    })
  },
)
