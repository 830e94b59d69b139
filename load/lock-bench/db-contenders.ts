/**
 * bench:lock contenders for the database backends (issue 12). They connect to the
 * machine's PostgreSQL and MariaDB (BENCH_PG_URL, BENCH_MYSQL_URL; defaults: the local
 * servers' test logins), in a schema/database shared by the holder and the waiter
 * process, dropped on close.
 */
import mysql from 'mysql2/promise'
import pg from 'pg'
import { createLocks, type Locks } from '../../src/index.js'
import { fromLocks, type BenchContender } from './contender.js'

const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const MYSQL_URL = process.env.BENCH_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306'

function postgresContender(mode: 'transaction' | 'session', describe: string): BenchContender {
  return {
    name: `stampede-guard postgres (${mode === 'transaction' ? 'xact' : 'session'})`,
    describe,
    async create() {
      const schema = `sg_bench_lock_${mode}`
      const pool = new pg.Pool({ connectionString: PG_URL, max: 4 })
      const locks = createLocks({ postgres: { pool, mode, schema }, namespace: `bench-pg-${mode}` })
      return fromLocks(locks as Locks<unknown>, async () => {
        await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {})
        await pool.end()
      })
    },
  }
}

export const DB_BENCH_CONTENDERS: BenchContender[] = [
  postgresContender(
    'transaction',
    'createLocks({ postgres }): BEGIN + SET LOCAL lock_timeout + pg_advisory_xact_lock in one round trip, token row, COMMIT',
  ),
  postgresContender(
    'session',
    "mode: 'session': a dedicated connection per hold, pg_advisory_lock, token row, unlock, close",
  ),
  {
    name: 'stampede-guard mariadb',
    describe: 'createLocks({ mysql }): GET_LOCK on a borrowed connection, token row, RELEASE_LOCK',
    async create() {
      const database = 'sg_bench_lock'
      const admin = await mysql.createConnection(MYSQL_URL)
      await admin.query(`CREATE DATABASE IF NOT EXISTS \`${database}\``)
      await admin.end()
      const pool = mysql.createPool({ uri: MYSQL_URL, database, connectionLimit: 4 })
      return fromLocks(createLocks({ mysql: pool, namespace: 'bench-my' }) as Locks<unknown>, async () => {
        await pool.query(`DROP DATABASE IF EXISTS \`${database}\``).catch(() => {})
        await pool.end()
      })
    },
  },
]
