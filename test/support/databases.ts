/**
 * The machine's PostgreSQL (127.0.0.1:5432, trust auth, user postgres) and MariaDB
 * (127.0.0.1:3306, root, empty password), for tests that need a real database.
 *
 * Each is probed once per test process (bounded). When one does not answer, its suites
 * are skipped with the reason printed, except under `CI=true`, where that is a failure
 * (`reportMissing`). Each test file gets its own database, dropped at the end: PostgreSQL
 * advisory locks are per database, so files running at once never see each other's locks.
 * MariaDB's GET_LOCK names are server-wide: tests also give each file its own namespace.
 */
import { randomBytes } from 'node:crypto'
import net from 'node:net'
import type { Pool as MysqlPool, PoolOptions as MysqlPoolOptions } from 'mysql2/promise'
import type { Pool as PgPool, PoolConfig as PgPoolConfig } from 'pg'
import { reportMissing } from './managed-process.js'

export const POSTGRES = {
  host: '127.0.0.1',
  port: Number(process.env.PGPORT ?? 5432),
  user: process.env.PGUSER ?? 'postgres',
  adminDatabase: process.env.PGDATABASE ?? 'test',
} as const
export const MARIADB = {
  host: '127.0.0.1',
  port: Number(process.env.MYSQL_PORT ?? 3306),
  user: process.env.MYSQL_USER ?? 'root',
  password: process.env.MYSQL_PASSWORD ?? '',
} as const
const PROBE_TIMEOUT_MS = 3_000

/** Whether something accepts TCP connections on 127.0.0.1:`port` (bounded). */
export function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(PROBE_TIMEOUT_MS, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => done(true))
  })
}

async function probe(what: string, port: number, query: () => Promise<unknown>): Promise<string | undefined> {
  if (!(await tcpOpen(port))) return `${what} does not accept connections on 127.0.0.1:${port}`
  try {
    await query()
    return undefined
  } catch (err) {
    return `${what} on 127.0.0.1:${port} refused the test login: ${(err as Error).message}`
  }
}

async function pgModule() {
  return (await import('pg')).default
}

/** A pg Pool on the machine's PostgreSQL, database `database`. The caller ends it. */
export async function pgPool(database: string, config: PgPoolConfig = {}): Promise<PgPool> {
  const pg = await pgModule()
  return new pg.Pool({
    host: POSTGRES.host,
    port: POSTGRES.port,
    user: POSTGRES.user,
    database,
    connectionTimeoutMillis: 5_000,
    ...config,
  })
}

async function mysqlModule() {
  return await import('mysql2/promise')
}

/** A mysql2 promise pool on the machine's MariaDB. The caller ends it. */
export async function mysqlPool(database: string | undefined, options: MysqlPoolOptions = {}): Promise<MysqlPool> {
  const mysql = await mysqlModule()
  return mysql.createPool({
    host: MARIADB.host,
    port: MARIADB.port,
    user: MARIADB.user,
    password: MARIADB.password,
    database,
    connectTimeout: 5_000,
    ...options,
  })
}

const postgresMissing = await probe('PostgreSQL', POSTGRES.port, async () => {
  const pool = await pgPool(POSTGRES.adminDatabase, { max: 1 })
  try {
    await pool.query('SELECT 1')
  } finally {
    await pool.end()
  }
})
const mariadbMissing = await probe('MariaDB/MySQL', MARIADB.port, async () => {
  const pool = await mysqlPool(undefined, { connectionLimit: 1 })
  try {
    await pool.query('SELECT 1')
  } finally {
    await pool.end()
  }
})

/** Use as `describe.skipIf(!postgresAvailable)`; the reason was printed (or, under CI=true, thrown). */
export const postgresAvailable = postgresMissing === undefined
/** Use as `describe.skipIf(!mariadbAvailable)`. */
export const mariadbAvailable = mariadbMissing === undefined
if (postgresMissing)
  reportMissing(`PostgreSQL (${postgresMissing})`, 'apt-get install postgresql, trust auth for 127.0.0.1')
if (mariadbMissing)
  reportMissing(
    `MariaDB (${mariadbMissing})`,
    'apt-get install mariadb-server, root with an empty password on 127.0.0.1',
  )

/** A name no other test file (or helper) uses: `sg_<label>_<pid>_<random>`. */
export function uniqueName(label: string): string {
  return `sg_${label.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${process.pid}_${randomBytes(3).toString('hex')}`
}

export interface TestDatabase {
  readonly name: string
  /** A new pool on this database, ended by drop(). */
  pool(config?: PgPoolConfig): Promise<PgPool>
  /** Ends the pools, then drops the database (terminating stray sessions, e.g. of killed workers). */
  drop(): Promise<void>
}

/** A fresh PostgreSQL database for one test file. */
export async function createPostgresDatabase(label: string): Promise<TestDatabase> {
  const name = uniqueName(label)
  const admin = await pgPool(POSTGRES.adminDatabase, { max: 1 })
  try {
    await admin.query(`CREATE DATABASE "${name}"`)
  } finally {
    await admin.end()
  }
  const pools: PgPool[] = []
  return {
    name,
    async pool(config = {}) {
      const pool = await pgPool(name, config)
      pool.on('error', () => {}) // an idle client whose backend was terminated by a test
      pools.push(pool)
      return pool
    },
    async drop() {
      await Promise.all(pools.map((pool) => pool.end().catch(() => {})))
      const cleanup = await pgPool(POSTGRES.adminDatabase, { max: 1 })
      try {
        await cleanup.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      } finally {
        await cleanup.end()
      }
    },
  }
}

export interface TestMariaDatabase {
  readonly name: string
  pool(options?: MysqlPoolOptions): Promise<MysqlPool>
  drop(): Promise<void>
}

/** A fresh MariaDB database for one test file. */
export async function createMariaDatabase(label: string): Promise<TestMariaDatabase> {
  const name = uniqueName(label)
  const admin = await mysqlPool(undefined, { connectionLimit: 1 })
  try {
    await admin.query(`CREATE DATABASE \`${name}\``)
  } finally {
    await admin.end()
  }
  const pools: MysqlPool[] = []
  return {
    name,
    async pool(options = {}) {
      const pool = await mysqlPool(name, options)
      pools.push(pool)
      return pool
    },
    async drop() {
      await Promise.all(pools.map((pool) => pool.end().catch(() => {})))
      const cleanup = await mysqlPool(undefined, { connectionLimit: 1 })
      try {
        await cleanup.query(`DROP DATABASE IF EXISTS \`${name}\``)
      } finally {
        await cleanup.end()
      }
    },
  }
}
