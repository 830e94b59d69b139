/**
 * The MariaDB/MySQL GET_LOCK backend against the machine's MariaDB (a database of its own
 * per file, and a namespace of its own, since GET_LOCK names are server-wide).
 */
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createLocks,
  InvalidArgumentError,
  LockBackendError,
  LockBusyError,
  LockLostError,
  type Locks,
} from '../../../src/lock/index.js'
import { createMysqlBackend, type MysqlLockOptions } from '../../../src/lock/mysql/backend.js'
import { lockName } from '../../../src/lock/mysql/names.js'
import { startBlackholeProxy } from '../../support/blackhole-proxy.js'
import {
  createMariaDatabase,
  MARIADB,
  mariadbAvailable,
  uniqueName,
  type TestMariaDatabase,
} from '../../support/databases.js'
import { freePort } from '../../support/managed-process.js'
import { until } from '../../support/timing.js'

describe.skipIf(!mariadbAvailable)('MariaDB/MySQL lock backend', () => {
  let db: TestMariaDatabase
  let pool: Pool
  let admin: Pool
  const namespace = uniqueName('ns').slice(0, 32)
  const opened: Locks<unknown>[] = []
  const locksFor = (
    options: Omit<MysqlLockOptions, 'pool' | 'connection'> & {
      pool?: Pool
      connection?: MysqlLockOptions['connection']
    } = {},
  ) => {
    const locks = createLocks({
      backend: createMysqlBackend({ namespace, ...(options.connection ? {} : { pool }), ...options }),
    })
    opened.push(locks as Locks<unknown>)
    return locks
  }
  /** The connection id holding `key`'s GET_LOCK, or null. */
  const holderOf = async (key: string) => {
    const [rows] = await admin.query('SELECT IS_USED_LOCK(?) AS id', [lockName(namespace, key)])
    return (rows as { id: number | null }[])[0]!.id
  }

  beforeAll(async () => {
    db = await createMariaDatabase('mylock')
    pool = await db.pool({ connectionLimit: 12 })
    admin = await db.pool({ connectionLimit: 2 })
  })
  afterAll(async () => {
    await Promise.all(opened.map((locks) => locks.close()))
    await db?.drop()
  })

  it('one holder at a time; a waiter waits inside GET_LOCK and gets in when the holder releases', async () => {
    const locks = locksFor()
    const holder = await locks.acquire('one')
    expect(await locks.tryAcquire('one')).toBeUndefined()
    let entered = false
    const waiter = locks.withLock('one', () => (entered = true), { wait: '30s' })
    await until(async () => {
      const [rows] = await admin.query(
        "SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE '%GET_LOCK(%' AND STATE LIKE '%lock%' AND ID <> CONNECTION_ID()",
      )
      return Number((rows as { n: number }[])[0]!.n) === 1
    }, 'the waiter to block in GET_LOCK')
    expect(entered).toBe(false)
    await holder.release()
    await waiter
    expect(entered).toBe(true)
    expect(await holderOf('one')).toBeNull()
  })

  it('a wait that runs out is LockBusyError; fencing tokens strictly increase; a killed connection aborts signal and frees the lock', async () => {
    const locks = locksFor()
    const holder = await locks.acquire('kill')
    const busy = await locks.acquire('kill', { wait: 300 }).catch((e: unknown) => e)
    expect(busy).toBeInstanceOf(LockBusyError)

    const lost = new Promise<unknown>((resolve) =>
      holder.signal.addEventListener('abort', () => resolve(holder.signal.reason), { once: true }),
    )
    await admin.query(`KILL ${await holderOf('kill')}`)
    expect(await lost).toBeInstanceOf(LockLostError)
    const next = await locks.acquire('kill', { wait: '10s' })
    expect(next.token).toBeGreaterThan(holder.token)
    await holder.release() // the lock is gone with its connection: nothing to do, no error
    await next.release()
    expect(await holderOf('kill')).toBeNull()
  })

  it('names over 64 characters are hashed (and long keys do not collide); own pool from connection options', async () => {
    const long = 'x'.repeat(100)
    expect(lockName(namespace, long)).toHaveLength(64)
    expect(lockName(namespace, long)).not.toBe(lockName(namespace, `${long}y`))
    const locks = locksFor({
      connection: {
        host: MARIADB.host,
        port: MARIADB.port,
        user: MARIADB.user,
        password: MARIADB.password,
        database: db.name,
      },
    })
    const a = await locks.acquire(long)
    const b = await locks.tryAcquire(`${long}y`)
    expect(b).toBeDefined()
    expect(await locks.tryAcquire(long)).toBeUndefined()
    await Promise.all([a.release(), b!.release()])
  })

  it('bad options are InvalidArgumentError naming the option', () => {
    const bad: [unknown, string][] = [
      [{}, 'mysql'],
      [{ pool, connection: {} }, 'mysql'],
      [{ pool: { query() {} } }, 'mysql.pool'],
      [{ pool, namespace: '#x' }, 'mysql.namespace'],
      [{ pool, database: 'a`b' }, 'mysql.database'],
      [{ pool, timeout: '5 parsecs' }, 'mysql.timeout'],
      [{ pool, connectionLimit: 0 }, 'mysql.connectionLimit'],
      [{ pool, lockWait: 1 }, 'mysql.lockWait'],
    ]
    for (const [options, argument] of bad) {
      let error: unknown
      try {
        createMysqlBackend(options as MysqlLockOptions)
      } catch (e) {
        error = e
      }
      expect(error, argument).toBeInstanceOf(InvalidArgumentError)
      expect((error as InvalidArgumentError).argument).toBe(argument)
    }
  })

  it('server down (refused) or silent (black-holed): LockBackendError within the bound, never a hang', async () => {
    const closedPort = await freePort()
    const down = locksFor({
      connection: { host: '127.0.0.1', port: closedPort, user: 'root', connectTimeout: 2_000 },
      timeout: 2_000,
    })
    expect(await down.acquire('down').catch((e: unknown) => e)).toBeInstanceOf(LockBackendError)

    const proxy = await startBlackholeProxy(MARIADB.port)
    try {
      const holder = await locksFor().acquire('silent')
      const silent = locksFor({
        connection: {
          host: '127.0.0.1',
          port: proxy.port,
          user: MARIADB.user,
          password: MARIADB.password,
          database: db.name,
        },
        timeout: 1_000,
      })
      const attempt = silent.acquire('silent', { wait: '1s' }).catch((e: unknown) => e)
      await until(() => proxy.connections > 0, 'the attempt to connect through the proxy')
      proxy.blackhole()
      const started = performance.now()
      expect(await attempt).toBeInstanceOf(LockBackendError)
      expect(performance.now() - started).toBeLessThan(1_000 + 1_000 + 3_000)
      await holder.release()
    } finally {
      await proxy.close()
    }
  })
})
