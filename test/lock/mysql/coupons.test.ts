/** The seeds' coupon test across 4 processes with the MariaDB GET_LOCK backend (stock in PostgreSQL, as for every backend: test/support/coupons/). */
import { afterAll, beforeAll, describe, it } from 'vitest'
import {
  createMariaDatabase,
  mariadbAvailable,
  postgresAvailable,
  uniqueName,
  type TestMariaDatabase,
} from '../../support/databases.js'
import { expectNeverOversold, runCouponContest } from '../../support/coupons/harness.js'

describe.skipIf(!mariadbAvailable || !postgresAvailable)(
  'coupon contest on the MariaDB lock: 1,000 coupons, 1,200 users, 4 processes',
  () => {
    let db: TestMariaDatabase
    beforeAll(async () => {
      db = await createMariaDatabase('coupons')
    })
    afterAll(async () => {
      await db?.drop()
    })

    it('never oversold, issued == decremented', async () => {
      const result = await runCouponContest({
        kind: 'mysql',
        factory: new URL('./coupons-factory.ts', import.meta.url),
        backend: { database: db.name, namespace: uniqueName('coupons').slice(0, 32) },
      })
      expectNeverOversold(result)
    }, 300_000)
  },
)
