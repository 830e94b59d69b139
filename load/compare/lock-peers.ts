/**
 * The locks `npm run compare` puts side by side (benchmark 3), each as a `BenchLock`
 * (acquire/release and the 4-process hand-off) and, where it has one, a coupon contender
 * (load/stampede/coupons/, issuing coupons from one PostgreSQL row).
 *
 * Ours and the seed spin lock are load/lock-bench's own entries; the peers from npm get a
 * `LockBackend` adapter here, so the coupon scenario runs the very same critical section
 * (`issueCoupon`) under them. PostgreSQL `SELECT … FOR UPDATE` is the database's own floor:
 * the row lock is the lock.
 */
import pg from 'pg'
import { Mutex } from 'redis-semaphore'
import { Redlock } from '@sesamecare-oss/redlock'
import { Redis } from 'ioredis'
import {
  BENCH_CONTENDERS,
  createLocks,
  fromLocks,
  LEASE_MS,
  underLock,
  type BenchLock,
  type ContenderEntry,
  type HeldLock,
  type LockBackend,
  type Locks,
} from './from-load.js'

export interface LockEnv {
  redisUrl: string
  databaseUrl: string
}

export interface LockPeer {
  name: string
  config: string
  /** The package whose version the results record ('' = this repository). */
  package: string
  create(env: LockEnv): Promise<BenchLock>
  /** The coupon contender (load/stampede/coupons/ name) that runs under this lock. */
  coupon: string
  /** Run once in the parent before any process creates the lock; undone by `cleanup`. */
  prepare?(env: LockEnv): Promise<void>
  cleanup?(env: LockEnv): Promise<void>
}

const NEVER = new AbortController().signal

/**
 * A `LockBackend` from an acquire function of a lock library (`undefined` = still busy
 * at the deadline). The libraries keep their own leases (redis-semaphore refreshes;
 * Redlock's lease outlives every hold here), so the front runs no watchdog ('session'),
 * and none issues a fencing token.
 */
function libraryBackend(
  name: string,
  acquire: (key: string, waitMs: number) => Promise<(() => Promise<unknown>) | undefined>,
): LockBackend {
  return {
    name,
    async acquire(request) {
      const release = await acquire(request.key, request.waitMs)
      if (!release) return undefined
      const held: HeldLock = {
        token: undefined,
        liveness: 'session',
        signal: NEVER,
        resource: undefined,
        renew: async () => true,
        release: async () => void (await release()),
      }
      return held
    },
    async close() {},
  }
}

const client = (url: string) => new Redis(url).on('error', () => {})

/** redis-semaphore's Mutex as its README shows it: lease 5 s auto-refreshed at 80 %, retry every 10 ms (its default). */
function semaphoreBackend(redis: Redis): LockBackend {
  return libraryBackend('redis-semaphore', async (key, waitMs) => {
    const mutex = new Mutex(redis, `compare-sem:${key}`, { lockTimeout: LEASE_MS, acquireTimeout: waitMs })
    // acquire() retries until acquireTimeout, then rejects with its TimeoutError: still busy.
    const acquired =
      waitMs > 0
        ? await mutex.acquire().then(
            () => true,
            () => false,
          )
        : await mutex.tryAcquire()
    return acquired ? () => mutex.release() : undefined
  })
}

/** @sesamecare-oss/redlock on one Redis: its defaults (retry every 200 ms ± 100 ms jitter), retries sized to the wait. */
function redlockBackend(redis: Redis): LockBackend {
  const redlock = new Redlock([redis])
  return libraryBackend('redlock', async (key, waitMs) => {
    try {
      const lock = await redlock.acquire([`compare-rl:${key}`], LEASE_MS, { retryCount: Math.ceil(waitMs / 200) + 1 })
      return () => lock.release()
    } catch {
      return undefined // ExecutionError: still busy after every retry
    }
  })
}

/** A peer on a `LockBackend` built over its own Redis client. */
function backendPeer(build: (redis: Redis) => LockBackend): (env: LockEnv) => Promise<BenchLock> {
  return async (env) => {
    const redis = client(env.redisUrl)
    return fromLocks(createLocks({ backend: build(redis) }), () => redis.disconnect())
  }
}

/** Coupon contenders for the adapted peers (the coupon workers import this module's CONTENDERS). */
function backendCoupon(build: (redis: Redis) => LockBackend): ContenderEntry['create'] {
  return async (context) => {
    const redis = client(context.redisUrl)
    return underLock(context, createLocks({ backend: build(redis) }), redis as never, false)
  }
}

export const CONTENDERS: Record<string, ContenderEntry> = {
  'redis-semaphore': {
    describe: 'redis-semaphore Mutex around issueCoupon (no fencing)',
    create: backendCoupon(semaphoreBackend),
  },
  redlock: {
    describe: '@sesamecare-oss/redlock (1 node) around issueCoupon (no fencing)',
    create: backendCoupon(redlockBackend),
  },
}

const ROW_LOCK_TABLE = 'sg_compare_row_locks'
const PG_LOCK_SCHEMA = 'sg_compare_locks'

/** BEGIN; SELECT … FOR UPDATE on the key's row (lock_timeout = the wait); release = COMMIT. One pooled connection per hold. */
async function rowLock(env: LockEnv): Promise<BenchLock> {
  const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 4 })
  return {
    async acquire(key, waitMs) {
      const db = await pool.connect()
      try {
        await db.query(
          `BEGIN; SET LOCAL lock_timeout = ${Math.max(1, Math.round(waitMs))}; ` +
            `SELECT 1 FROM ${ROW_LOCK_TABLE} WHERE key = ${db.escapeLiteral(key)} FOR UPDATE`,
        )
      } catch (error) {
        await db.query('ROLLBACK').catch(() => {})
        db.release()
        throw error
      }
      return async () => {
        try {
          await db.query('COMMIT')
        } finally {
          db.release()
        }
      }
    },
    close: () => pool.end(),
  }
}

const benchEntry = (name: string) => {
  const entry = BENCH_CONTENDERS.find((c) => c.name === name)
  if (!entry) throw new Error(`load/lock-bench has no contender '${name}'`)
  return entry
}

/** The keys the benchmark locks (the row lock needs their rows to exist). */
export const LATENCY_KEY = 'compare:latency'
export const HANDOFF_KEY = 'compare:handoff'

export const LOCK_PEERS: LockPeer[] = [
  {
    name: 'stampede-guard redis',
    package: '',
    config: "createLocks({ redis }), acquire(key, { wait, lease: '5s' }): token, pub/sub wake-up, watchdog",
    create: (env) => benchEntry('stampede-guard redis').create({ redisUrls: [env.redisUrl] }),
    coupon: 'with-lock',
  },
  {
    name: 'redis-semaphore Mutex',
    package: 'redis-semaphore',
    config:
      'new Mutex(redis, key, { lockTimeout: 5 s, acquireTimeout: wait }): retry every 10 ms (default), auto-refresh',
    create: backendPeer(semaphoreBackend),
    coupon: 'redis-semaphore',
  },
  {
    name: '@sesamecare-oss/redlock',
    package: '@sesamecare-oss/redlock',
    config: 'new Redlock([redis]).acquire([key], 5 s, { retryCount }): 1 node, retry every 200 ± 100 ms (default)',
    create: backendPeer(redlockBackend),
    coupon: 'redlock',
  },
  {
    name: 'spin lock',
    package: '',
    config: 'the seed: SET NX PX 5 s + token, else sleep 100 ms and retry; Lua compare-and-delete',
    create: (env) => benchEntry('seed spin lock').create({ redisUrls: [env.redisUrl] }),
    coupon: 'spin-lock',
  },
  {
    name: 'PG SELECT … FOR UPDATE',
    package: '',
    config: 'BEGIN; SET LOCAL lock_timeout; SELECT … FOR UPDATE on a row per key; COMMIT to release',
    create: rowLock,
    coupon: 'select-for-update',
    async prepare(env) {
      const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 1 })
      try {
        await pool.query(`CREATE TABLE IF NOT EXISTS ${ROW_LOCK_TABLE} (key text PRIMARY KEY)`)
        await pool.query(`INSERT INTO ${ROW_LOCK_TABLE} (key) VALUES ($1), ($2) ON CONFLICT DO NOTHING`, [
          LATENCY_KEY,
          HANDOFF_KEY,
        ])
      } finally {
        await pool.end()
      }
    },
    async cleanup(env) {
      const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 1 })
      await pool.query(`DROP TABLE IF EXISTS ${ROW_LOCK_TABLE}`).catch(() => {})
      await pool.end()
    },
  },
  {
    name: 'stampede-guard postgres',
    package: '',
    config: "createLocks({ postgres: { pool, mode: 'transaction' } }): pg_advisory_xact_lock, token row",
    // Not load/lock-bench's entry: that one drops its schema on close, and here 5 processes share it.
    async create(env) {
      const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 4 })
      const locks = createLocks({
        postgres: { pool, mode: 'transaction', schema: PG_LOCK_SCHEMA },
        namespace: 'compare-pg',
      })
      return fromLocks(locks as Locks<unknown>, () => pool.end())
    },
    coupon: 'pg-advisory',
    async cleanup(env) {
      const pool = new pg.Pool({ connectionString: env.databaseUrl, max: 1 })
      await pool.query(`DROP SCHEMA IF EXISTS ${PG_LOCK_SCHEMA} CASCADE`).catch(() => {})
      await pool.end()
    },
  },
]

export function lockPeer(name: string): LockPeer {
  const peer = LOCK_PEERS.find((p) => p.name === name)
  if (!peer)
    throw new Error(`unknown lock peer '${name}' (expected one of: ${LOCK_PEERS.map((p) => p.name).join(', ')})`)
  return peer
}
