/**
 * Example 5: issuing a limited coupon without overselling: a Redis lock around a
 * PostgreSQL (pg) transaction, the fencing token on the row, release after COMMIT.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx examples/coupon-issue.ts
 *
 * 50 users ask at once for a coupon with 20 in stock. Each issue is
 *   lock → BEGIN → read stock → decrement (fenced) → insert the coupon → COMMIT → release.
 *
 * Two lessons from the seed articles are in `issueCoupon`:
 * - Release after COMMIT. Released before, the next holder reads the stock as it was
 *   before our uncommitted decrement, and both sell the last coupon (test/lock/common/coupon-issue.test.ts
 *   shows it).
 * - Fence the write. If this holder stalled past its lease (GC, a paused VM), another one
 *   got the lock with a higher token; `WHERE fence < $token` then refuses our late write.
 *
 * The functions are exported: the cross-process coupon tests and `npm run load -- --scenario
 * coupons` run exactly this code.
 */
import { pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import pg from 'pg'
import { createLocks, type Locks } from '../src/index.js' // in your project: from 'stampede-guard'

/** Where the coupon tables live: a pool and a schema of their own. */
export interface CouponStore {
  pool: pg.Pool
  schema: string
}

export type IssueOutcome = 'issued' | 'sold-out' | 'fenced'

export interface IssueOptions {
  /** Check the fencing token on the row. Off for Redlock, which issues none. Default true. */
  fence?: boolean
  /** The seeds' bug, for the test that shows it: release the lock before COMMIT. Default false. */
  releaseBeforeCommit?: boolean
  /** How long to wait for the lock. Default '30s'. */
  wait?: string | number
}

export async function createCouponTables(store: CouponStore, couponId: number, stock: number): Promise<void> {
  const s = quote(store.schema)
  await store.pool.query(`CREATE SCHEMA IF NOT EXISTS ${s}`)
  await store.pool.query(
    `CREATE TABLE IF NOT EXISTS ${s}.coupon_stock (id integer PRIMARY KEY, remaining integer NOT NULL, fence bigint NOT NULL DEFAULT 0)`,
  )
  await store.pool.query(
    `CREATE TABLE IF NOT EXISTS ${s}.issued_coupons (coupon_id integer NOT NULL, ` +
      `user_id integer NOT NULL, fence bigint NOT NULL, PRIMARY KEY (coupon_id, user_id))`,
  )
  await store.pool.query(
    `INSERT INTO ${s}.coupon_stock (id, remaining) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET remaining = EXCLUDED.remaining, fence = 0`,
    [couponId, stock],
  )
  await store.pool.query(`DELETE FROM ${s}.issued_coupons WHERE coupon_id = $1`, [couponId])
}

/** Issues one coupon to `userId`, or says why not. */
export async function issueCoupon<Resource>(
  store: CouponStore,
  locks: Locks<Resource>,
  couponId: number,
  userId: number,
  options: IssueOptions = {},
): Promise<IssueOutcome> {
  const { fence = true, releaseBeforeCommit = false, wait = '30s' } = options
  const s = quote(store.schema)
  await using lock = await locks.acquire(`coupon:${couponId}`, { wait })
  const token = fence ? lock.token.toString() : null // Redlock: no token (reading it would throw)
  const db = await store.pool.connect()
  try {
    await db.query('BEGIN')
    const { rows } = await db.query<{ remaining: number }>(`SELECT remaining FROM ${s}.coupon_stock WHERE id = $1`, [
      couponId,
    ])
    if ((rows[0]?.remaining ?? 0) <= 0) {
      await db.query('ROLLBACK')
      return 'sold-out'
    }
    // The fence: a holder whose lock was taken over has a lower token than the row's.
    const decremented = await db.query(
      `UPDATE ${s}.coupon_stock SET remaining = remaining - 1, fence = COALESCE($2::bigint, ` +
        `fence) WHERE id = $1 AND ($2::bigint IS NULL OR fence < $2::bigint)`,
      [couponId, token],
    )
    if (decremented.rowCount !== 1) {
      await db.query('ROLLBACK')
      return 'fenced'
    }
    await db.query(
      `INSERT INTO ${s}.issued_coupons (coupon_id, user_id, fence) VALUES ($1, $2, COALESCE($3::bigint, 0))`,
      [couponId, userId, token],
    )
    if (releaseBeforeCommit) await lock.release() // WRONG: the next holder reads the stock before our decrement is committed
    await db.query('COMMIT')
    return 'issued' // `await using` releases the lock here: after COMMIT
  } catch (error) {
    await db.query('ROLLBACK').catch(() => {})
    throw error
  } finally {
    db.release()
  }
}

/** Stock left and coupons issued, to check `issued === stock − remaining` and `remaining ≥ 0`. */
export async function countCoupons(
  store: CouponStore,
  couponId: number,
): Promise<{ remaining: number; issued: number }> {
  const s = quote(store.schema)
  const { rows } = await store.pool.query<{ remaining: number; issued: string }>(
    `SELECT (SELECT remaining FROM ${s}.coupon_stock WHERE id = $1) AS remaining, (SELECT count(*) FROM ${s}.issued_coupons WHERE coupon_id = $1) AS issued`,
    [couponId],
  )
  return { remaining: rows[0]!.remaining, issued: Number(rows[0]!.issued) }
}

function quote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`
}

async function main(): Promise<void> {
  if (!process.env.REDIS_URL) {
    console.log('REDIS_URL is not set: this example needs a Redis for the lock')
    return
  }
  const redis = new Redis(process.env.REDIS_URL)
  const pool = new pg.Pool({
    connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    max: 10,
  })
  const locks = createLocks({ redis, namespace: 'example-coupons' })
  const store: CouponStore = { pool, schema: 'example_coupons' }
  try {
    await createCouponTables(store, 42, 20)
    const outcomes = await Promise.all(Array.from({ length: 50 }, (_, user) => issueCoupon(store, locks, 42, user + 1)))
    const count = (outcome: IssueOutcome) => outcomes.filter((o) => o === outcome).length
    const { remaining, issued } = await countCoupons(store, 42)
    console.log(
      `50 users, 20 coupons → issued ${count('issued')}, sold out for ${count('sold-out')}, fenced ${count('fenced')}`,
    )
    console.log(
      `in PostgreSQL: ${issued} coupons issued, ${remaining} left (${issued + remaining === 20 && remaining >= 0 ? 'never oversold' : 'OVERSOLD'})`,
    )
    await pool.query('DROP SCHEMA example_coupons CASCADE')
  } finally {
    await locks.close()
    redis.disconnect()
    await pool.end()
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main()
