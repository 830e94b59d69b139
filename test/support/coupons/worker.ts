/** One contestant process: builds its Locks with the factory named in argv, then issues coupons on request. */
import { pathToFileURL } from 'node:url'
import path from 'node:path'
import { countCoupons, issueCoupon, type CouponStore } from '../../../examples/coupon-issue.js'
import { pgPool } from '../databases.js'
import { serveRequests } from '../worker-side.js'
import type { BatchResult, IssueBatch, LockFactory, WorkerConfig } from './protocol.js'

const [, , kind, factoryPath] = process.argv
if (!kind || !factoryPath) throw new Error('usage: worker.ts <kind> <factory module>')
const config = JSON.parse(process.env.COUPON_CONFIG ?? '{}') as WorkerConfig
const factory = (await import(pathToFileURL(path.resolve(factoryPath)).href)).default as LockFactory
const { locks, close } = await factory(config.backend)
const pool = await pgPool(config.database, { max: 8 })
const store: CouponStore = { pool, schema: config.schema }

async function issueAll(batch: IssueBatch): Promise<BatchResult> {
  const result: BatchResult = { issued: 0, soldOut: 0, fenced: 0, errors: [] }
  const queue = [...batch.users]
  await Promise.all(
    Array.from({ length: batch.concurrency }, async () => {
      for (let user = queue.shift(); user !== undefined; user = queue.shift()) {
        try {
          const outcome = await issueCoupon(store, locks, config.couponId, user, { fence: config.fence })
          if (outcome === 'issued') result.issued++
          else if (outcome === 'sold-out') result.soldOut++
          else result.fenced++
        } catch (error) {
          result.errors.push(`${(error as Error).name}: ${(error as Error).message}`)
        }
      }
    }),
  )
  return result
}

process.once('disconnect', () => {
  void close().finally(() => pool.end())
})
serveRequests(async (message: IssueBatch | 'count') =>
  message === 'count' ? countCoupons(store, config.couponId) : issueAll(message),
)
console.log(`[coupons] ${kind} worker ready`)
