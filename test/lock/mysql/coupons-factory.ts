/** Coupon contest factory: the MariaDB/MySQL GET_LOCK backend. Config: `{ database, namespace }` (counter table in `database`). */
import { createLocks } from '../../../src/index.js'
import { mysqlPool } from '../../support/databases.js'

export default async function mysqlLocks(config: { database: string; namespace: string }) {
  const pool = await mysqlPool(config.database, { connectionLimit: 5 })
  const locks = createLocks({ mysql: pool, namespace: config.namespace })
  return {
    locks,
    async close() {
      await locks.close()
      await pool.end()
    },
  }
}
