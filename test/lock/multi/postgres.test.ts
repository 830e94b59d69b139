/** `withLocks` on PostgreSQL advisory locks (one transaction per key, taken one at a time): the shared multi-key tests. */
import type { Pool } from 'pg'
import { describe } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { advisoryKey } from '../../../src/lock/postgres/keys.js'
import { createPostgresDatabase, postgresAvailable } from '../../support/databases.js'
import { redisAvailable } from '../../support/redis.js'
import { MULTI_NAMESPACE, multiBackendSuite } from './backend-suite.js'

describe.skipIf(!postgresAvailable || !redisAvailable)('locks.withLocks() on PostgreSQL', () => {
  let pool: Pool
  multiBackendSuite({
    label: 'pg',
    async start() {
      const db = await createPostgresDatabase('multi')
      pool = await db.pool({ max: 8 })
      const locks = createLocks({ postgres: pool, namespace: MULTI_NAMESPACE })
      return { locks, store: { backend: 'postgres', database: db.name }, stop: () => db.drop() }
    },
    async entries(key) {
      // Granted and waiting advisory locks on this key, in this database.
      const { classid, objid, objsubid } = advisoryKey('hash64', MULTI_NAMESPACE, key).locksFilter
      const { rows } = await pool.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2
           AND objsubid = $3 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [classid, objid, objsubid],
      )
      return Number(rows[0]!.n)
    },
    contend: { rounds: 25, holdMs: 3 },
  })
})
