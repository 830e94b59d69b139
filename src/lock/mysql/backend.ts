import { LockBackendError } from '../../errors.js'
import type { AcquireRequest, HeldLock, LockBackend } from '../backend.js'
import { boundedBackendCall } from '../backend-calls.js'
import { mysqlClaims } from './claims.js'
import { acquireMysqlLock } from './lock.js'
import { parseMysqlOptions, type MysqlCallbackPoolLike, type MysqlLockOptions, type MysqlPoolLike } from './options.js'
import { mysqlTables } from './tables.js'

/**
 * `createLocks({ mysql: pool })`: MariaDB/MySQL `GET_LOCK` locks and ShedLock-style
 * run-once claims. `liveness` is `'session'`: a lock lasts as long as its connection.
 * With `connection` options instead of a pool, the backend opens its own pool (loading
 * mysql2 on first use) and ends it in `close()`; a pool passed in stays open.
 */
export function createMysqlBackend(
  input: MysqlPoolLike | MysqlCallbackPoolLike | MysqlLockOptions,
  defaults: { namespace?: string } = {},
): LockBackend<undefined> {
  const settings = parseMysqlOptions(input, defaults)
  const tables = mysqlTables(settings)
  let ownPool: Promise<MysqlPoolLike> | undefined
  const pool = (): Promise<MysqlPoolLike> => {
    if (settings.pool) return Promise.resolve(settings.pool)
    ownPool ??= openOwnPool(settings.connection!, settings.connectionLimit).catch((err) => {
      ownPool = undefined
      throw err
    })
    return ownPool
  }
  return {
    name: 'mysql',
    claims: mysqlClaims(settings, pool, tables),
    async acquire(request: AcquireRequest): Promise<HeldLock<undefined> | undefined> {
      return acquireMysqlLock(settings, await pool(), tables, request)
    },
    async close() {
      const own = ownPool
      ownPool = undefined
      if (own)
        await boundedBackendCall(
          'mysql',
          'ending the pool',
          own.then((p) => p.end()),
          settings.timeoutMs,
        ).catch(() => {})
    },
  }
}

async function openOwnPool(
  connection: Record<string, unknown> | string,
  connectionLimit: number,
): Promise<MysqlPoolLike> {
  let mysql: { createPool(options: Record<string, unknown>): unknown }
  try {
    mysql = (await import('mysql2/promise')) as unknown as typeof mysql
  } catch (err) {
    throw new LockBackendError('mysql', 'the mysql2 package is not installed (npm install mysql2)', err)
  }
  const options = typeof connection === 'string' ? { uri: connection } : connection
  return mysql.createPool({ connectionLimit, enableKeepAlive: true, ...options }) as MysqlPoolLike
}

export type { MysqlLockOptions } from './options.js'
