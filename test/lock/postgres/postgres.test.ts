/**
 * The PostgreSQL lock backend against the machine's PostgreSQL (a database of its own per
 * file): both modes, the transaction handed to the critical section, fencing, a killed
 * holder connection, typed errors for bad input and for a server that is down or silent.
 */
import type { Pool, PoolClient } from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLocks,
  InvalidArgumentError,
  LockBackendError,
  LockBusyError,
  LockLostError,
  type Locks,
} from '../../../src/lock/index.js'
import { createPostgresBackend, type PostgresLockOptions } from '../../../src/lock/postgres/backend.js'
import { startBlackholeProxy } from '../../support/blackhole-proxy.js'
import { createPostgresDatabase, postgresAvailable, type TestDatabase } from '../../support/databases.js'
import { freePort } from '../../support/managed-process.js'
import { gate, until } from '../../support/timing.js'

type Mode = 'transaction' | 'session'

describe.skipIf(!postgresAvailable)('PostgreSQL lock backend', () => {
  let db: TestDatabase
  let pool: Pool
  let admin: Pool
  const opened: Locks<unknown>[] = []
  const locksFor = (options: Omit<PostgresLockOptions, 'pool'> = {}, over: Pool = pool) => {
    const locks = createLocks<PoolClient | undefined>({
      backend: createPostgresBackend({ pool: over, ...options }) as never,
    })
    opened.push(locks as Locks<unknown>)
    return locks
  }
  /** pids of the server sessions holding (granted) or waiting for an advisory lock. */
  const advisory = async (granted: boolean) =>
    (
      await admin.query<{ pid: number }>(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        [granted],
      )
    ).rows.map((r) => r.pid)

  beforeAll(async () => {
    db = await createPostgresDatabase('pglock')
    pool = await db.pool({ max: 12 })
    admin = await db.pool({ max: 2 })
  })
  afterAll(async () => {
    await Promise.all(opened.map((locks) => locks.close()))
    await db?.drop()
  })

  it.each<Mode>(['transaction', 'session'])(
    '%s mode: one holder at a time; a waiter blocks inside the server (no polling) and gets in when the holder lets go',
    async (mode) => {
      const locks = locksFor({ mode })
      const key = `one-at-a-time-${mode}`
      const holder = await locks.acquire(key)
      expect(await locks.tryAcquire(key)).toBeUndefined()
      let entered = false
      const waiter = locks.withLock(key, () => (entered = true), { wait: '30s' })
      // The waiter is one blocked pg_advisory_*lock call: its session waits on an advisory lock.
      await until(async () => (await advisory(false)).length === 1, 'the waiter to block on the advisory lock')
      const waiting = await admin.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND datname = current_database()",
      )
      expect(waiting.rows[0].n).toBe(1)
      expect(entered).toBe(false)
      await holder.release()
      await waiter
      expect(entered).toBe(true)
      expect(await advisory(true)).toEqual([])
    },
  )

  it.each<Mode>(['transaction', 'session'])(
    '%s mode: a wait that runs out is LockBusyError with how long it waited; lock_timeout ends it, not a client timer',
    async (mode) => {
      const locks = locksFor({ mode })
      const key = `busy-${mode}`
      const holder = await locks.acquire(key)
      const started = performance.now()
      const error = await locks.acquire(key, { wait: 400 }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LockBusyError)
      expect((error as LockBusyError).waitedMs).toBeGreaterThanOrEqual(390)
      expect(performance.now() - started).toBeLessThan(5_000)
      await holder.release()
      expect(await advisory(false)).toEqual([]) // the timed-out waiter left nothing behind
    },
  )

  it('transaction mode: fn gets the transaction client; its writes commit with the lock held, a throw rolls them back', async () => {
    const locks = locksFor()
    await pool.query('CREATE TABLE IF NOT EXISTS tx_writes (note text NOT NULL)')
    await locks.withLock('tx', async ({ resource }) => {
      await resource!.query("INSERT INTO tx_writes VALUES ('kept')")
      // not visible outside before the commit that also releases the lock
      expect((await pool.query('SELECT count(*)::int AS n FROM tx_writes')).rows[0].n).toBe(0)
    })
    expect((await pool.query('SELECT note FROM tx_writes')).rows).toEqual([{ note: 'kept' }])

    const boom = new Error('boom')
    await expect(
      locks.withLock('tx', async ({ resource }) => {
        await resource!.query("INSERT INTO tx_writes VALUES ('rolled back')")
        throw boom
      }),
    ).rejects.toBe(boom)
    expect((await pool.query('SELECT note FROM tx_writes')).rows).toEqual([{ note: 'kept' }])
  })

  it('transaction mode: a statement that failed inside fn makes COMMIT roll back, and withLock says so (LockBackendError) instead of pretending', async () => {
    const locks = locksFor()
    await pool.query('CREATE TABLE IF NOT EXISTS tx_unique (id int PRIMARY KEY)')
    await pool.query('INSERT INTO tx_unique VALUES (1) ON CONFLICT DO NOTHING')
    const error = await locks
      .withLock('tx-failed', async ({ resource }) => {
        await resource!.query('INSERT INTO tx_unique VALUES (2)')
        await resource!.query('INSERT INTO tx_unique VALUES (1)').catch(() => 'swallowed by the app')
      })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockBackendError)
    expect((error as Error).message).toMatch(/COMMIT rolled back/)
    expect((await pool.query('SELECT id FROM tx_unique ORDER BY id')).rows).toEqual([{ id: 1 }])
    expect(await locks.tryAcquire('tx-failed').then((h) => h?.release().then(() => true))).toBe(true)
  })

  it.each<Mode>(['transaction', 'session'])(
    "%s mode: fencing tokens strictly increase per key (also after a rolled-back holder), and a stale holder's write is refused",
    async (mode) => {
      const locks = locksFor({ mode })
      const tokens: bigint[] = []
      for (let i = 0; i < 5; i++) {
        await locks
          .withLock(`fence-${mode}`, ({ token }) => {
            tokens.push(token)
            if (i === 2) throw new Error('rolled back')
          })
          .catch(() => {})
      }
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!)

      // How a protected row uses it: a write carries its token, and an older token is refused.
      await pool.query(
        `CREATE TABLE IF NOT EXISTS fenced_${mode} (id int PRIMARY KEY, value text, fence bigint NOT NULL DEFAULT 0)`,
      )
      await pool.query(`INSERT INTO fenced_${mode} VALUES (1, 'initial', 0) ON CONFLICT DO NOTHING`)
      const write = (value: string, token: bigint) =>
        pool.query(`UPDATE fenced_${mode} SET value = $1, fence = $2 WHERE id = 1 AND fence < $2`, [
          value,
          token.toString(),
        ])
      const stale = await locks.acquire(`fence-${mode}`)
      const staleToken = stale.token
      await stale.release()
      await locks.withLock(`fence-${mode}`, async ({ token }) => {
        expect((await write('newer holder', token)).rowCount).toBe(1)
      })
      expect((await write('late write of the older holder', staleToken)).rowCount).toBe(0)
      expect((await pool.query(`SELECT value FROM fenced_${mode}`)).rows[0].value).toBe('newer holder')
    },
  )

  it.each<Mode>(['transaction', 'session'])(
    "%s mode: pg_terminate_backend on the holder's connection aborts signal with LockLostError, and the next holder gets in",
    async (mode) => {
      const locks = locksFor({ mode })
      const key = `terminate-${mode}`
      const holder = await locks.acquire(key)
      const [pid] = await advisory(true)
      expect(pid).toBeTypeOf('number')
      const lost = new Promise<unknown>((resolve) =>
        holder.signal.addEventListener('abort', () => resolve(holder.signal.reason), { once: true }),
      )
      await admin.query('SELECT pg_terminate_backend($1)', [pid])
      const reason = await lost
      expect(reason).toBeInstanceOf(LockLostError)
      const next = await locks.acquire(key, { wait: '10s' })
      expect(next.token).toBeGreaterThan(holder.token)
      await next.release()
      if (mode === 'transaction') {
        // its transaction is gone: releasing says nothing it wrote was kept
        await expect(holder.release()).rejects.toBeInstanceOf(LockBackendError)
      } else {
        await holder.release()
      }
    },
  )

  it('session mode: the lock outlives transactions on its own connection and pins no pool slot; keys map to bigint or two int4 per namespace', async () => {
    const small = await db.pool({ max: 1 })
    const locks = locksFor({ mode: 'session', keys: 'int4pair', namespace: 'app-a', fencing: false }, small)
    const held = await locks.acquire('shared-name')
    // the pool's only client is free: the lock is on a dedicated connection
    expect((await small.query('SELECT 1 AS one')).rows[0].one).toBe(1)
    const rows = (
      await admin.query(
        "SELECT objsubid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
      )
    ).rows
    expect(rows).toEqual([{ objsubid: 2 }])
    // another namespace, same key: a different lock
    const other = locksFor({ mode: 'session', keys: 'int4pair', namespace: 'app-b', fencing: false })
    const otherHeld = await other.tryAcquire('shared-name')
    expect(otherHeld).toBeDefined()
    await otherHeld!.release()
    await held.release()
    expect(await advisory(true)).toEqual([])
  })

  it('bad options are InvalidArgumentError naming the option', () => {
    const bad: [unknown, string][] = [
      [{}, 'postgres.pool'],
      [{ pool: { query() {} } }, 'postgres.pool'],
      [{ pool, mode: 'xact' }, 'postgres.mode'],
      [{ pool, keys: 'md5' }, 'postgres.keys'],
      [{ pool, schema: 'x; DROP TABLE y' }, 'postgres.schema'],
      [{ pool, namespace: '' }, 'postgres.namespace'],
      [{ pool, timeout: -1 }, 'postgres.timeout'],
      [{ pool, fencing: 'yes' }, 'postgres.fencing'],
      [{ pool, lockTimeout: 5 }, 'postgres.lockTimeout'],
    ]
    for (const [options, argument] of bad) {
      let error: unknown
      try {
        createPostgresBackend(options as PostgresLockOptions)
      } catch (e) {
        error = e
      }
      expect(error, JSON.stringify(argument)).toBeInstanceOf(InvalidArgumentError)
      expect((error as InvalidArgumentError).argument).toBe(argument)
    }
  })

  it('PostgreSQL down (refused) or silent (black-holed mid-wait): LockBackendError within the bound, never a hang', async () => {
    const closedPort = await freePort() // nothing listens there
    const down = await db.pool({ port: closedPort, connectionTimeoutMillis: 0 })
    const refused = await locksFor({ timeout: 2_000 }, down)
      .acquire('down')
      .catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(LockBackendError)

    const proxy = await startBlackholeProxy(5432)
    try {
      const silent = await db.pool({ port: proxy.port, connectionTimeoutMillis: 0 })
      const locks = locksFor({ timeout: 1_000 }, silent)
      const holder = await locksFor().acquire('silent')
      const attempt = locks.acquire('silent', { wait: '1s' }).catch((e: unknown) => e)
      await until(async () => (await advisory(false)).length === 1, 'the attempt through the proxy to wait')
      proxy.blackhole() // the lock_timeout answer never arrives
      const started = performance.now()
      const error = await attempt
      expect(error).toBeInstanceOf(LockBackendError)
      expect(performance.now() - started).toBeLessThan(2_000 + 1_000 + 3_000) // wait + timeout + slack for a loaded box
      await holder.release()
    } finally {
      await proxy.close()
    }
  })

  it('transaction mode: a release ended from outside (LockLostError, as close() does) rolls back and closes the client, so fn cannot go on writing in autocommit', async () => {
    await pool.query('CREATE TABLE IF NOT EXISTS tx_outside (note text NOT NULL)')
    const backend = createPostgresBackend({ pool })
    const held = (await backend.acquire({
      key: 'outside',
      leaseMs: 5_000,
      waitMs: 0,
      signal: new AbortController().signal,
    }))!
    const tx = held.resource!
    await tx.query("INSERT INTO tx_outside VALUES ('half a critical section')")
    await held.release(new LockLostError('outside', 'close() was called'))
    // fn, still running, tries its next statement
    await expect(tx.query("INSERT INTO tx_outside VALUES ('after the end')")).rejects.toThrow()
    expect((await pool.query('SELECT count(*)::int AS n FROM tx_outside')).rows[0].n).toBe(0)
  })

  it("locks.close() while withLock's fn runs: its transaction rolls back, and its next statement fails instead of running in autocommit", async () => {
    const locks = locksFor()
    await pool.query('CREATE TABLE IF NOT EXISTS tx_closed (note text NOT NULL)')
    const inside = gate()
    const closed = gate()
    let after: unknown
    const running = locks.withLock('closing', async ({ resource, signal }) => {
      await resource!.query("INSERT INTO tx_closed VALUES ('before close')")
      inside.open()
      await closed.promise
      expect(signal.aborted).toBe(true)
      after = await resource!.query("INSERT INTO tx_closed VALUES ('after close')").catch((e: unknown) => e)
    })
    await inside.promise
    await locks.close()
    closed.open()
    await running.catch(() => {})
    expect(after).toBeInstanceOf(Error)
    expect((await pool.query('SELECT count(*)::int AS n FROM tx_closed')).rows[0].n).toBe(0)
  })

  it("the longest wait there is (2^31 − 1 ms) still waits: the bound on wait + timeout stays within Node's timer range", async () => {
    const locks = locksFor()
    const held = await locks.acquire('longest-wait', { wait: 2 ** 31 - 1 })
    await held.release()
  })

  it("the caller's signal stops a wait at once and takes nothing", async () => {
    const locks = locksFor()
    const holder = await locks.acquire('abort')
    const controller = new AbortController()
    const attempt = locks.acquire('abort', { wait: '30s', signal: controller.signal }).catch((e: unknown) => e)
    await until(async () => (await advisory(false)).length === 1, 'the waiter to block')
    const reason = new Error('caller gave up')
    controller.abort(reason)
    expect(await attempt).toBe(reason)
    await holder.release()
    // The server notices the gone client within client_connection_check_interval (1 s), once it runs: generous on a loaded box.
    await until(
      async () => (await advisory(false)).length === 0 && (await advisory(true)).length === 0,
      'the abandoned wait to end server-side',
      30_000,
    )
  })
})
