/**
 * Who competes in `npm run load -- --scenario coupons`: each contender issues one coupon
 * per call against the tables of examples/coupon-issue.ts. Add one with an entry here.
 */
import { Redis } from 'ioredis'
import { issueCoupon, type CouponStore } from '../../../examples/coupon-issue.js'
import { createLocks, LockBusyError, type Locks } from '../../../src/index.js'
import { NoLockBackend, SpinLockBackend } from '../../shared/baseline-backends.js'
import type { ContenderContext, ContenderEntry, CouponContender } from './contender.js'
import { DB_CONTENDERS } from './db-contenders.js'

/** A contender that runs `issueCoupon` under the lock of `locks`; a lock that stayed busy counts as 'gave-up'. */
export function underLock(
  context: ContenderContext,
  locks: Locks<unknown>,
  redis: Redis,
  fence: boolean,
): CouponContender {
  const store: CouponStore = { pool: context.pool, schema: context.schema }
  return {
    async issue(userId) {
      try {
        return { outcome: await issueCoupon(store, locks, context.couponId, userId, { fence }), retries: 0 }
      } catch (error) {
        if (error instanceof LockBusyError) return { outcome: 'gave-up', retries: 0 }
        throw error
      }
    },
    async close() {
      await locks.close()
      redis.disconnect()
    },
  }
}

export const CONTENDERS: Record<string, ContenderEntry> = {
  'no-lock': {
    describe: 'no lock at all: read stock, decrement, insert, COMMIT',
    async create(context) {
      const redis = new Redis(context.redisUrl, { lazyConnect: true })
      return underLock(context, createLocks({ backend: new NoLockBackend() }), redis, false)
    },
  },
  'spin-lock': {
    describe: "the seeds' lock: SET NX PX 5 s, else sleep 100 ms, up to 50 retries; no fencing",
    async create(context) {
      const redis = new Redis(context.redisUrl)
      return underLock(
        context,
        createLocks({ backend: new SpinLockBackend(redis, `spin-${context.schema}`) }),
        redis,
        false,
      )
    },
  },
  'with-lock': {
    describe: 'stampede-guard withLock on Redis: pub/sub wake-up, watchdog, fenced row',
    async create(context) {
      const redis = new Redis(context.redisUrl)
      return underLock(context, createLocks({ redis, namespace: `coupons-${context.schema}` }), redis, true)
    },
  },
  'with-lock-fair': {
    describe: 'stampede-guard withLock on Redis with fair: true: FIFO line, the head woken alone, fenced row',
    async create(context) {
      const redis = new Redis(context.redisUrl)
      return underLock(context, createLocks({ redis, namespace: `coupons-${context.schema}`, fair: true }), redis, true)
    },
  },
  // the database patterns and the PostgreSQL lock (issue 12)
  ...DB_CONTENDERS,
}
