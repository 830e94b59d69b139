/**
 * bench:lock contenders for the database backends (issue 12). They connect to the
 * machine's PostgreSQL and MariaDB (BENCH_PG_URL, BENCH_MYSQL_URL; defaults: the local
 * servers' test logins), in a schema/database of their own, dropped on close.
 */
import mysql from 'mysql2/promise'
import pg from 'pg'
import { createLocks } from '../../src/index.js'
import type { BenchContender, BenchLock } from './contenders.js'

const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const MYSQL_URL = process.env.BENCH_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306'

async function postgresLock(mode: 'transaction' | 'session'): Promise<BenchLock> {
  const schema = `sg_bench_lock_${mode}` // shared by the holder and the waiter process
  const pool = new pg.Pool({ connectionString: PG_URL, max: 4 })
  const locks = createLocks({ postgres: { pool, mode, schema }, namespace: `bench-pg-${mode}` })
  return {
    async acquire(key, waitMs) {
      const held = await locks.acquire(key, { wait: waitMs })
      return () => held.release()
    },
    async close() {
      await locks.close()
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {})
      await pool.end()
    },
  }
}

export const DB_BENCH_CONTENDERS: BenchContender[] = [
  {
    name: 'stampede-guard postgres (xact)',
    describe: "createLocks({ postgres }): BEGIN + SET LOCAL lock_timeout + pg_advisory_xact_lock in one round trip, token row, COMMIT",
    create: () => postgresLock('transaction'),
  },
  {
    name: 'stampede-guard postgres (session)',
    describe: "mode: 'session': a dedicated connection per hold, pg_advisory_lock, token row, unlock, close",
    create: () => postgresLock('session'),
  },
  {
    name: 'stampede-guard mariadb',
    describe: 'createLocks({ mysql }): GET_LOCK on a borrowed connection, token row, RELEASE_LOCK',
    async create() {
      const database = "sg_bench_lock" // shared by the holder and the waiter process
      const admin = await mysql.createConnection(MYSQL_URL)
      await admin.query(`CREATE DATABASE IF NOT EXISTS \`${database}\``)
      await admin.end()
      const pool = mysql.createPool({ uri: MYSQL_URL, database, connectionLimit: 4 })
      const locks = createLocks({ mysql: pool, namespace: "bench-my" })
      return {
        async acquire(key, waitMs) {
          const held = await locks.acquire(key, { wait: waitMs })
          return () => held.release()
        },
        async close() {
          await locks.close()
          await pool.query(`DROP DATABASE IF EXISTS \`${database}\``).catch(() => {})
          await pool.end()
        },
      }
    },
  },
]
