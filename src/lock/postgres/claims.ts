import { randomUUID } from 'node:crypto'
import type { Claim, ClaimStore } from '../backend.js'
import { boundedBackendCall } from '../backend-calls.js'
import type { PostgresSettings } from './options.js'
import type { PostgresTables } from './schema.js'

/**
 * ShedLock's JDBC provider, on PostgreSQL: one row per job name, and every instant from
 * the server's `now()`. A claim is an upsert that only overwrites a row whose
 * `lock_until` has passed, so of several instances firing the same tick exactly one gets
 * a row back; the others skip at once, without waiting.
 */
export function postgresClaims(settings: PostgresSettings, tables: PostgresTables): ClaimStore {
  const claimSql =
    `INSERT INTO ${tables.runOnce} AS r (name, lock_until, locked_at, locked_by) VALUES ($1, now() + $2 * interval '1 millisecond', now(), $3) ` +
    'ON CONFLICT (name) DO UPDATE SET lock_until = EXCLUDED.lock_until, locked_at = EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by ' +
    'WHERE r.lock_until <= EXCLUDED.locked_at RETURNING locked_by'
  // Keeps the claim until locked_at + atLeast; a claim that overran lockAtMostFor and was
  // taken by another instance is not ours any more (locked_by), so it is left alone.
  const finishSql = `UPDATE ${tables.runOnce} SET lock_until = GREATEST(now(), locked_at + $2 * interval '1 millisecond') WHERE name = $1 AND locked_by = $3`
  return {
    async claim(name: string, atMostMs: number): Promise<Claim | undefined> {
      await tables.ensure()
      const owner = randomUUID()
      const result = await boundedBackendCall(
        'postgres',
        'claiming the run',
        settings.pool.query(claimSql, [name, atMostMs, owner]),
        settings.timeoutMs,
      ).catch((error: unknown) => {
        // unanswered: the claim may still land; end it behind us (lockAtLeastFor 0)
        settings.pool.query(finishSql, [name, 0, owner]).catch(() => {})
        throw error
      })
      if (result.rows.length === 0) return undefined
      return {
        async finish(atLeastMs: number): Promise<void> {
          await boundedBackendCall(
            'postgres',
            'finishing the run',
            settings.pool.query(finishSql, [name, atLeastMs, owner]),
            settings.timeoutMs,
          )
        },
      }
    },
  }
}
