import { randomUUID } from 'node:crypto'
import type { Claim, ClaimStore } from '../backend.js'
import { boundedBackendCall } from '../backend-calls.js'
import { counterKey } from './names.js'
import type { MysqlPoolLike, MysqlSettings } from './options.js'
import type { MysqlTables } from './tables.js'

/**
 * ShedLock's MySQL provider: an upsert that takes over a row only once its `lock_until`
 * (server UTC) has passed, then a read of who holds it. The assignments in ON DUPLICATE
 * KEY UPDATE run left to right, so `lock_until` is assigned last, after the two that test it.
 */
export function mysqlClaims(
  settings: MysqlSettings,
  pool: () => Promise<MysqlPoolLike>,
  tables: MysqlTables,
): ClaimStore {
  const claimSql =
    `INSERT INTO ${tables.runOnce} (k, name, lock_until, locked_at, locked_by) VALUES (?, ?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(3), ?) ` +
    'ON DUPLICATE KEY UPDATE ' +
    'locked_by = IF(lock_until <= UTC_TIMESTAMP(3), VALUES(locked_by), locked_by), ' +
    'locked_at = IF(lock_until <= UTC_TIMESTAMP(3), VALUES(locked_at), locked_at), ' +
    'lock_until = IF(lock_until <= UTC_TIMESTAMP(3), VALUES(lock_until), lock_until)'
  const finishSql = `UPDATE ${tables.runOnce} SET lock_until = GREATEST(UTC_TIMESTAMP(3), locked_at + INTERVAL ? MICROSECOND) WHERE k = ? AND locked_by = ?`
  return {
    async claim(name: string, atMostMs: number): Promise<Claim | undefined> {
      const db = await pool()
      await tables.ensure(db)
      const owner = randomUUID()
      const row = counterKey(settings.namespace, name)
      await boundedBackendCall(
        'mysql',
        'claiming the run',
        db.query(claimSql, [row, name, atMostMs * 1000, owner]),
        settings.timeoutMs,
      ).catch((error: unknown) => {
        // unanswered: the claim may still land; end it behind us (lockAtLeastFor 0)
        db.query(finishSql, [0, row, owner]).catch(() => {})
        throw error
      })
      const [rows] = await boundedBackendCall(
        'mysql',
        'reading the claim',
        db.query(`SELECT locked_by FROM ${tables.runOnce} WHERE k = ?`, [row]),
        settings.timeoutMs,
      )
      if ((rows as { locked_by: string }[])[0]?.locked_by !== owner) return undefined
      return {
        async finish(atLeastMs: number): Promise<void> {
          await boundedBackendCall(
            'mysql',
            'finishing the run',
            db.query(finishSql, [atLeastMs * 1000, row, owner]),
            settings.timeoutMs,
          )
        },
      }
    },
  }
}
