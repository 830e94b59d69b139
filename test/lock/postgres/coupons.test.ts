/** The seeds' coupon test across 4 processes with the PostgreSQL advisory-lock backend (test/support/coupons/). */
import { afterAll, describe, it } from 'vitest'
import { pgPool, POSTGRES, postgresAvailable, uniqueName } from '../../support/databases.js'
import { expectNeverOversold, runCouponContest } from '../../support/coupons/harness.js'

describe.skipIf(!postgresAvailable)(
  'coupon contest on the PostgreSQL lock: 1,000 coupons, 1,200 users, 4 processes',
  () => {
    const schema = uniqueName('pg_lock_tables')
    afterAll(async () => {
      const admin = await pgPool(POSTGRES.adminDatabase, { max: 1 })
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).finally(() => admin.end())
    })

    // The default (transaction) mode; session mode takes the same path through the contest
    // and is covered by test/lock/postgres/postgres.test.ts, so the file stays at one contest.
    it('transaction mode: never oversold, issued == decremented', async () => {
      const mode = 'transaction'
      const result = await runCouponContest({
        kind: `postgres_${mode}`,
        factory: new URL('./coupons-factory.ts', import.meta.url),
        backend: { database: POSTGRES.adminDatabase, schema, namespace: uniqueName('coupons'), mode },
      })
      expectNeverOversold(result)
    }, 300_000)
  },
)
