/**
 * examples/coupon-issue.ts: releasing the lock before COMMIT oversells, releasing after
 * COMMIT does not. A deferred constraint trigger makes every COMMIT take 200 ms, so the
 * window the seeds warn about (lock free, decrement not yet visible) is wide and certain.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { countCoupons, createCouponTables, issueCoupon, type CouponStore } from '../../../examples/coupon-issue.js'
import { createLocks, type Locks } from '../../../src/index.js'
import { pgPool, POSTGRES, postgresAvailable, uniqueName } from '../../support/databases.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'

const STOCK = 3
const USERS = 10

describe.skipIf(!redisAvailable || !postgresAvailable)('coupon issue: release after COMMIT', () => {
  let server: RedisServer
  let locks: Locks
  let store: CouponStore
  beforeAll(async () => {
    server = await startRedis()
    locks = createLocks({ redis: server.client(), namespace: 'order' })
    store = { pool: await pgPool(POSTGRES.adminDatabase, { max: USERS + 2 }), schema: uniqueName('release_order') }
  })
  afterAll(async () => {
    await store?.pool.query(`DROP SCHEMA IF EXISTS "${store.schema}" CASCADE`)
    await store?.pool.end()
    await locks?.close()
    await server?.stop()
  })

  async function contest(couponId: number, releaseBeforeCommit: boolean) {
    await createCouponTables(store, couponId, STOCK)
    const s = `"${store.schema}"`
    await store.pool.query(
      `CREATE OR REPLACE FUNCTION ${s}.slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.2); RETURN NULL; END $$`,
    )
    await store.pool.query(`DROP TRIGGER IF EXISTS slow_commit ON ${s}.issued_coupons`)
    await store.pool.query(
      `CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON ${s}.issued_coupons ` +
        `DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${s}.slow_commit()`,
    )
    const outcomes = await Promise.all(
      Array.from({ length: USERS }, (_, user) =>
        issueCoupon(store, locks, couponId, user + 1, { releaseBeforeCommit }),
      ),
    )
    return { outcomes, ...(await countCoupons(store, couponId)) }
  }

  it('released before COMMIT, the next holder reads the old stock and the coupon is oversold', async () => {
    const { outcomes, issued, remaining } = await contest(1, true)
    console.log(`[release before COMMIT] ${USERS} users, ${STOCK} coupons → ${issued} issued, ${remaining} left`)
    expect(outcomes.filter((o) => o === 'issued').length).toBeGreaterThan(STOCK)
    expect(issued).toBeGreaterThan(STOCK)
    expect(remaining).toBeLessThan(0)
  }, 60_000)

  it('released after COMMIT (the example as written), exactly the stock is issued', async () => {
    const { outcomes, issued, remaining } = await contest(2, false)
    console.log(`[release after COMMIT] ${USERS} users, ${STOCK} coupons → ${issued} issued, ${remaining} left`)
    expect(outcomes.filter((o) => o === 'issued')).toHaveLength(STOCK)
    expect(outcomes.filter((o) => o === 'sold-out')).toHaveLength(USERS - STOCK)
    expect(issued).toBe(STOCK)
    expect(remaining).toBe(0)
  }, 60_000)
})
