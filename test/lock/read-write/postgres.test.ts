/**
 * Read-write locks on PostgreSQL (transaction mode: `pg_advisory_xact_lock_shared` for
 * readers, `pg_advisory_xact_lock` for the writer): many readers at once, a writer alone
 * across real processes (counted by a shared table), the server's writers-first queue, a
 * SIGKILLed reader's hold ending with its connection, read → write upgrade rejected at
 * once, tokens strictly increasing, bad input typed and sending nothing.
 */
import type { Pool } from 'pg'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { InvalidArgumentError, LockBusyError, LockUpgradeError } from '../../../src/errors.js'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { createPostgresDatabase, postgresAvailable, type TestDatabase } from '../../support/databases.js'
import { sleep, until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'

const WORKER = new URL('./postgres-worker.ts', import.meta.url)

describe.skipIf(!postgresAvailable)('read-write locks (PostgreSQL)', () => {
  let db: TestDatabase
  let pool: Pool
  let admin: Pool
  let count = 0
  const fresh = () => `rw-${++count}`
  const opened: Locks<unknown>[] = []
  const workers: Worker[] = []
  const newLocks = (options: { mode?: 'transaction' | 'session' } = {}, over: unknown = pool) => {
    const locks = createLocks({ postgres: { pool: over as Pool, ...options }, namespace: 'rw' })
    opened.push(locks as Locks<unknown>)
    return locks
  }
  /** Advisory locks of this database by mode ('ShareLock' readers, 'ExclusiveLock' writers) and grant. */
  const advisory = async (mode: 'ShareLock' | 'ExclusiveLock', granted: boolean) =>
    (
      await admin.query<{ pid: number }>(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND mode = $1 AND granted = $2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        [mode, granted],
      )
    ).rows.map((r) => r.pid)
  const spawn = async () => {
    const worker = await forkWorker(WORKER, { env: { PG_DATABASE: db.name } })
    workers.push(worker)
    return worker
  }

  beforeAll(async () => {
    db = await createPostgresDatabase('pgrw')
    pool = await db.pool({ max: 16 })
    admin = await db.pool({ max: 2 })
    await admin.query('CREATE TABLE rw_inside (id serial PRIMARY KEY, kind text NOT NULL)')
  })
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()))
    await Promise.all(workers.splice(0).map((w) => w.stop()))
  })
  afterAll(async () => {
    await db?.drop()
  })

  it('readers share it (5 at once, none waiting for a token), a writer has it alone, and tokens grow', async () => {
    const name = fresh()
    const locks = newLocks()
    const rw = locks.readWrite(name)
    const readers = []
    for (let i = 0; i < 5; i++) readers.push(await rw.acquireRead({ wait: 0 }))
    expect(await advisory('ShareLock', true)).toHaveLength(5)
    expect(new Set(readers.map((r) => r.token)).size).toBe(5)
    await expect(newLocks().readWrite(name).acquireWrite({ wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await Promise.all(readers.map((r) => r.release()))
    const writer = await rw.acquireWrite({ wait: 0 })
    for (const reader of readers) expect(writer.token).toBeGreaterThan(reader.token)
    await expect(newLocks().readWrite(name).acquireRead({ wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await expect(newLocks().readWrite(name).acquireWrite({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
    await writer.release()
    await rw.read(async ({ token }) => expect(token).toBeGreaterThan(writer.token))
  })

  it('the read-write lock and the mutex on the same name are different locks', async () => {
    const name = fresh()
    const locks = newLocks()
    const mutex = await locks.acquire(name, { wait: 0 })
    const writer = await locks.readWrite(name).acquireWrite({ wait: 0 })
    await Promise.all([writer.release(), mutex.release()])
  })

  it('readers in three processes hold it at once', async () => {
    const name = fresh()
    const all = await Promise.all([spawn(), spawn(), spawn()])
    for (const worker of all) await worker.request({ op: 'read', name, wait: 0 })
    expect(await advisory('ShareLock', true)).toHaveLength(3)
    await expect(newLocks().readWrite(name).acquireWrite({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
  })

  it('readers and writers in three processes: never a writer with anyone else, counted in a shared table', async () => {
    const name = fresh()
    const all = await Promise.all([spawn(), spawn(), spawn()])
    const results = await Promise.all(
      all.map((w) =>
        w.request<{ sections: number; violations: number; maxReaders: number }>(
          { op: 'mix', name, rounds: 40, writeEvery: 4 },
          120_000,
        ),
      ),
    )
    const sections = results.reduce((n, r) => n + r.sections, 0)
    const violations = results.reduce((n, r) => n + r.violations, 0)
    const maxReaders = Math.max(...results.map((r) => r.maxReaders))
    console.log(
      `[pg rw processes] ${sections} sections (30 writes), ${violations} overlaps, at most ${maxReaders} readers together`,
    )
    expect(sections).toBe(120)
    expect(violations).toBe(0)
    expect((await admin.query('SELECT count(*)::int AS n FROM rw_inside')).rows[0].n).toBe(0)
  })

  it('writers first: once a writer waits, a new reader waits behind it (pg_try fails), and the server grants the writer next', async () => {
    const name = fresh()
    const [a, b, c] = [newLocks(), newLocks(), newLocks()]
    const first = await a.readWrite(name).acquireRead({ wait: 0 })
    const order: string[] = []
    const writer = b
      .readWrite(name)
      .acquireWrite({ wait: '20s' })
      .then((h) => (order.push('writer'), h))
    await until(async () => (await advisory('ExclusiveLock', false)).length === 1, 'the writer to wait')
    // Only a reader holds it, yet a new reader is refused: it would overtake the waiting writer.
    await expect(c.readWrite(name).acquireRead({ wait: 0 })).rejects.toBeInstanceOf(LockBusyError)
    const later = c
      .readWrite(name)
      .acquireRead({ wait: '20s' })
      .then((h) => (order.push('reader'), h))
    await until(async () => (await advisory('ShareLock', false)).length === 1, 'the later reader to wait')
    await first.release()
    const held = await writer
    expect(await advisory('ShareLock', false)).toHaveLength(1) // the later reader still waits
    expect(order).toEqual(['writer'])
    await held.release()
    const reader = await later
    expect(order).toEqual(['writer', 'reader'])
    expect(held.token).toBeGreaterThan(first.token)
    expect(reader.token).toBeGreaterThan(held.token)
    await reader.release()
  })

  it('a writer is not starved by a stream of overlapping readers', async () => {
    const name = fresh()
    const rw = newLocks().readWrite(name)
    let stop = false
    let writerWaiting = false
    let writerIn = false
    let readsAfterWriterWaited = 0
    let reads = 0
    // 4 readers in a loop, each holding 50 ms: at any moment some reader is in.
    const stream = Array.from({ length: 4 }, async (_, i) => {
      await sleep(i * 15)
      while (!stop) {
        await rw.read(
          async () => {
            reads++
            if (writerWaiting && !writerIn) readsAfterWriterWaited++
            await sleep(50)
          },
          { wait: '30s' },
        )
      }
    })
    await until(() => reads >= 8, 'the stream of readers')
    const writer = newLocks()
      .readWrite(name)
      .write(async () => ((writerIn = true), reads), { wait: '30s' })
    await until(async () => (await advisory('ExclusiveLock', false)).length === 1, 'the writer to wait')
    writerWaiting = true
    const readsBefore = await writer
    stop = true
    await Promise.all(stream)
    console.log(
      `[pg rw writers first] ${readsBefore} reads before the writer got in; ${readsAfterWriterWaited} began between its wait and its grant`,
    )
    // Between the writer queueing and getting in, only readers granted before it queued can
    // begin (their fn starts one token query after the grant): at most the 4 of the stream.
    expect(readsAfterWriterWaited).toBeLessThanOrEqual(4)
  })

  it("a SIGKILLed reader's hold ends with its connection, and the waiting writer gets in", async () => {
    const name = fresh()
    const worker = await spawn()
    await worker.request({ op: 'read', name, wait: 0 })
    const [deadPid] = await advisory('ShareLock', true)
    const waiting = newLocks().readWrite(name).acquireWrite({ wait: '20s' })
    await until(async () => (await advisory('ExclusiveLock', false)).length === 1, 'the writer to wait')
    const killedAt = performance.now()
    worker.kill('SIGKILL')
    const held = await waiting
    console.log(`[pg rw dead reader] writer in ${(performance.now() - killedAt).toFixed(0)} ms after the SIGKILL`)
    expect(await advisory('ShareLock', true)).not.toContain(deadPid)
    expect(await advisory('ExclusiveLock', true)).toHaveLength(1)
    await held.release()
  })

  it('read → write in one call chain rejects at once with LockUpgradeError, asking the server nothing; the read lock stays held', async () => {
    const name = fresh()
    const rw = newLocks().readWrite(name)
    await rw.read(async ({ signal }) => {
      await expect(rw.write(async () => 'never')).rejects.toBeInstanceOf(LockUpgradeError)
      await expect(rw.acquireWrite()).rejects.toBeInstanceOf(LockUpgradeError)
      expect(await advisory('ExclusiveLock', false)).toHaveLength(0)
      expect(await advisory('ShareLock', true)).toHaveLength(1)
      expect(signal.aborted).toBe(false)
    })
    // A read inside a write runs under the write lock, in its transaction.
    await rw.write(async ({ token, resource }) =>
      rw.read(async (inner) => {
        expect(inner.token).toBe(token)
        expect(inner.resource).toBe(resource)
      }),
    )
  })

  it("tokens strictly increase across readers and writers of several Locks, and a reader's writes commit with its release", async () => {
    const name = fresh()
    const [a, b] = [newLocks(), newLocks()]
    await admin.query('CREATE TABLE IF NOT EXISTS rw_seen (token bigint)')
    let last = 0n
    for (let i = 0; i < 12; i++) {
      const rw = (i % 2 ? a : b).readWrite(name)
      const run = async ({ token, resource }: { token: bigint; resource: unknown }) => {
        expect(token).toBeGreaterThan(last)
        last = token
        await (resource as Pool).query('INSERT INTO rw_seen VALUES ($1)', [token])
      }
      await (i % 3 === 0 ? rw.write(run) : rw.read(run))
    }
    expect((await admin.query('SELECT count(*)::int AS n FROM rw_seen')).rows[0].n).toBe(12)
  })

  it('bad input is a typed error naming the argument, and takes no connection; session mode has none', async () => {
    let connects = 0
    const counted = new Proxy(pool, {
      get(target, prop) {
        if (prop === 'connect') return () => (connects++, target.connect())
        const value = Reflect.get(target, prop) as unknown
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      },
    })
    const locks = newLocks({}, counted)
    expect(() => locks.readWrite('')).toThrow(expect.objectContaining({ argument: 'name' }))
    expect(() => locks.readWrite(7 as never)).toThrow(InvalidArgumentError)
    const rw = locks.readWrite('ok')
    await expect(rw.read(5 as never)).rejects.toMatchObject({ argument: 'fn' })
    await expect(rw.write(() => {}, { lease: 1 })).rejects.toMatchObject({ argument: 'lease' })
    await expect(rw.acquireRead({ wait: -1 })).rejects.toMatchObject({ argument: 'wait' })
    await expect(rw.acquireWrite({ color: 'red' } as never)).rejects.toMatchObject({ argument: 'color' })
    expect(connects).toBe(0)
    await rw.read(() => {})
    expect(connects).toBeGreaterThan(0) // the counter counts
    const session = newLocks({ mode: 'session' })
    expect(() => session.readWrite('x')).toThrow(expect.objectContaining({ argument: 'readWrite' }))
  })
})
