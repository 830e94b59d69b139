/** `withLocks` on MariaDB GET_LOCK (one connection per key, taken one at a time): the shared multi-key tests. */
import type { Pool } from 'mysql2/promise'
import { describe } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { lockName } from '../../../src/lock/mysql/names.js'
import { createMariaDatabase, mariadbAvailable } from '../../support/databases.js'
import { redisAvailable } from '../../support/redis.js'
import { MULTI_NAMESPACE, multiBackendSuite } from './backend-suite.js'

describe.skipIf(!mariadbAvailable || !redisAvailable)('locks.withLocks() on MariaDB', () => {
  let pool: Pool
  multiBackendSuite({
    // GET_LOCK names are server-wide: the label keeps this file's keys apart from other tests'.
    label: `my${process.pid}`,
    async start() {
      const db = await createMariaDatabase('multi')
      pool = await db.pool({ connectionLimit: 8 })
      const locks = createLocks({ mysql: pool, namespace: MULTI_NAMESPACE })
      return { locks, store: { backend: 'mysql', database: db.name }, stop: () => db.drop() }
    },
    async entries(key) {
      // The holder of the GET_LOCK name (waiters are not listed by the server).
      const [rows] = await pool.query('SELECT IS_USED_LOCK(?) AS holder', [lockName(MULTI_NAMESPACE, key)])
      return (rows as { holder: number | null }[])[0]!.holder === null ? 0 : 1
    },
    contend: { rounds: 25, holdMs: 3 },
  })
})
