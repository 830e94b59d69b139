/**
 * Coupon contest factory: the PostgreSQL advisory-lock backend (default transaction mode).
 * Config: `{ database, schema, namespace, mode? }`: the lock's counter table goes in
 * `schema`, and `namespace` keeps its advisory keys apart from other tests on the database.
 */
import { createLocks } from '../../../src/index.js'
import { pgPool } from '../../support/databases.js'

export default async function postgresLocks(config: {
  database: string
  schema: string
  namespace: string
  mode?: 'transaction' | 'session'
}) {
  const pool = await pgPool(config.database, { max: 5 })
  const locks = createLocks({
    postgres: { pool, schema: config.schema, mode: config.mode ?? 'transaction' },
    namespace: config.namespace,
  })
  return {
    locks,
    async close() {
      await locks.close()
      await pool.end()
    },
  }
}
