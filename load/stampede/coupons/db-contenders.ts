/**
 * The coupon scenario's database contenders (issue 12): the seed article's two DB
 * patterns and the PostgreSQL advisory lock, each issuing one coupon from the tables of
 * examples/coupon-issue.ts (`coupon_stock`, `issued_coupons`, in one schema):
 *
 * - `pg-advisory`: `createLocks({ postgres })`, `withLock` on the coupon, and the SQL on the
 *   lock's own transaction (`resource`), so the decrement commits as the lock ends; fenced.
 * - `select-for-update`: BEGIN; `SELECT … FOR UPDATE` on the stock row; decrement; insert; COMMIT.
 *   The row lock is the lock: no lock service at all.
 * - `optimistic-version`: read `remaining, version`; then one statement decrements only if the
 *   version is unchanged and inserts the coupon in the same statement; on a lost race,
 *   retry (counted) after a short jittered pause, up to `MAX_RETRIES`.
 *
 * Each `issue` answers its outcome and how many retries it took.
 */
import type pg from 'pg'
import { createLocks, type Locks } from '../../../src/index.js'
import type { ContenderContext, ContenderEntry, CouponContender, CouponIssue } from './contender.js'

type DbContenderName = 'pg-advisory' | 'select-for-update' | 'optimistic-version'

/** Optimistic retries before an issue gives up (the scenario reports how many it took). */
const MAX_RETRIES = 1_000

/** The entries `CONTENDERS` spreads in. */
export const DB_CONTENDERS: Record<DbContenderName, ContenderEntry> = {
  'pg-advisory': {
    describe:
      "stampede-guard withLock on PostgreSQL (pg_advisory_xact_lock); the SQL runs on the lock's own transaction, fenced",
    create: async (context) => dbContender('pg-advisory', context),
  },
  'select-for-update': {
    describe: 'no lock service: BEGIN; SELECT … FOR UPDATE on the stock row; decrement; insert; COMMIT',
    create: async (context) => dbContender('select-for-update', context),
  },
  'optimistic-version': {
    describe: `no lock: read the version, then decrement + insert in one statement only if it is unchanged; retry (≤ ${MAX_RETRIES})`,
    async create(context) {
      await context.pool.query(
        `ALTER TABLE "${context.schema}".coupon_stock ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0`,
      )
      return dbContender('optimistic-version', context)
    },
  },
}

function dbContender(name: DbContenderName, context: ContenderContext): CouponContender {
  const s = `"${context.schema}"`
  const { pool, couponId } = context
  switch (name) {
    case 'pg-advisory': {
      const locks = createLocks<pg.PoolClient>({
        postgres: { pool, schema: context.schema },
        namespace: `coupons-${context.schema}`,
      }) as unknown as Locks<pg.PoolClient>
      return {
        issue: (userId) =>
          locks.withLock(
            `coupon:${couponId}`,
            async ({ resource: tx, token }): Promise<CouponIssue> => {
              const { rows } = await tx.query<{ remaining: number }>(
                `SELECT remaining FROM ${s}.coupon_stock WHERE id = $1`,
                [couponId],
              )
              if ((rows[0]?.remaining ?? 0) <= 0) return { outcome: 'sold-out', retries: 0 }
              await tx.query(
                `UPDATE ${s}.coupon_stock SET remaining = remaining - 1, fence = $2 WHERE id = $1 AND fence < $2`,
                [couponId, token.toString()],
              )
              await tx.query(`INSERT INTO ${s}.issued_coupons (coupon_id, user_id, fence) VALUES ($1, $2, $3)`, [
                couponId,
                userId,
                token.toString(),
              ])
              return { outcome: 'issued', retries: 0 }
            },
            { wait: '60s' },
          ),
        close: () => locks.close(),
      }
    }
    case 'select-for-update':
      return {
        async issue(userId) {
          const db = await pool.connect()
          try {
            await db.query('BEGIN')
            const { rows } = await db.query<{ remaining: number }>(
              `SELECT remaining FROM ${s}.coupon_stock WHERE id = $1 FOR UPDATE`,
              [couponId],
            )
            if ((rows[0]?.remaining ?? 0) <= 0) {
              await db.query('ROLLBACK')
              return { outcome: 'sold-out', retries: 0 }
            }
            await db.query(`UPDATE ${s}.coupon_stock SET remaining = remaining - 1 WHERE id = $1`, [couponId])
            await db.query(`INSERT INTO ${s}.issued_coupons (coupon_id, user_id, fence) VALUES ($1, $2, 0)`, [
              couponId,
              userId,
            ])
            await db.query('COMMIT')
            return { outcome: 'issued', retries: 0 }
          } catch (error) {
            await db.query('ROLLBACK').catch(() => {})
            throw error
          } finally {
            db.release()
          }
        },
        close: async () => {},
      }
    case 'optimistic-version': {
      // One statement: the decrement happens only if nobody changed the row since we read
      // it, and the coupon row is inserted by the same statement, so both or neither land.
      const casSql =
        `WITH won AS (UPDATE ${s}.coupon_stock SET remaining = remaining - 1, version ` +
        `= version + 1 WHERE id = $1 AND version = $2 AND remaining > 0 RETURNING id) ` +
        `INSERT INTO ${s}.issued_coupons (coupon_id, user_id, fence) SELECT id, $3, 0 FROM won`
      return {
        async issue(userId) {
          for (let retries = 0; ; retries++) {
            const { rows } = await pool.query<{ remaining: number; version: string }>(
              `SELECT remaining, version FROM ${s}.coupon_stock WHERE id = $1`,
              [couponId],
            )
            if ((rows[0]?.remaining ?? 0) <= 0) return { outcome: 'sold-out', retries }
            const won = await pool.query(casSql, [couponId, rows[0]!.version, userId])
            if (won.rowCount === 1) return { outcome: 'issued', retries }
            if (retries >= MAX_RETRIES) return { outcome: 'gave-up', retries }
            await new Promise((resolve) => setTimeout(resolve, Math.random() * 5)) // spread the herd a little
          }
        },
        close: async () => {},
      }
    }
  }
}
