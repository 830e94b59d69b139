import { boundedBackendCall } from '../backend-calls.js'
import type { MysqlPoolLike, MysqlSettings } from './options.js'

/**
 * The backend's two small tables, created on first use (in `database`, or the
 * connection's current one):
 * - `sg_lock_fences(k, token)`: one row per key ever locked with fencing on; `k` is
 *   SHA-256(namespace NUL key). The token starts at the server clock in µs and then
 *   rises by at least one, so a deleted row never makes a token repeat.
 * - `sg_run_once(k, name, lock_until, locked_at, locked_by)`: ShedLock's table, in UTC.
 */
export interface MysqlTables {
  readonly fences: string
  readonly runOnce: string
  ensure(pool: MysqlPoolLike): Promise<void>
}

export function mysqlTables(settings: MysqlSettings): MysqlTables {
  const prefix = settings.database === undefined ? '' : `\`${settings.database}\`.`
  const fences = `${prefix}sg_lock_fences`
  const runOnce = `${prefix}sg_run_once`
  let ready: Promise<void> | undefined
  const create = async (pool: MysqlPoolLike) => {
    const where =
      settings.database === undefined
        ? " (no database option: in the connection's current database)"
        : ` in ${settings.database}`
    const what = `creating the tables${where}`
    await boundedBackendCall(
      'mysql',
      what,
      pool.query(`CREATE TABLE IF NOT EXISTS ${fences} (k BINARY(32) NOT NULL PRIMARY KEY, token BIGINT NOT NULL)`),
      settings.timeoutMs,
    )
    await boundedBackendCall(
      'mysql',
      what,
      pool.query(
        `CREATE TABLE IF NOT EXISTS ${runOnce} (k BINARY(32) NOT NULL PRIMARY KEY, name TEXT NOT NULL, ` +
          'lock_until DATETIME(3) NOT NULL, locked_at DATETIME(3) NOT NULL, locked_by VARCHAR(64) NOT NULL)',
      ),
      settings.timeoutMs,
    )
  }
  return {
    fences,
    runOnce,
    ensure(pool) {
      ready ??= create(pool).catch((err) => {
        ready = undefined
        throw err
      })
      return ready
    },
  }
}

/** Issues the next token for row `?` (starting value `?` = server µs) and returns it through LAST_INSERT_ID. */
export function nextTokenSql(fences: string): string {
  return (
    `INSERT INTO ${fences} (k, token) VALUES (?, LAST_INSERT_ID(CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED))) ` +
    'ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, VALUES(token)))'
  )
}
