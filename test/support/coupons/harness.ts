/**
 * Runs the coupon contest: `processes` workers (real child processes) issue `coupons`
 * coupons to `users` users from one PostgreSQL row, in a schema of their own, through the
 * backend under test. Plug in another backend with a factory module (factories/*.ts):
 *
 *   const result = await runCouponContest({ kind: 'etcd', factory: new URL('./my-factory.ts', import.meta.url), backend: { endpoints } })
 *   expectNeverOversold(result)
 */
import { fileURLToPath } from 'node:url'
import { expect } from 'vitest'
import { countCoupons, createCouponTables, type CouponStore } from '../../../examples/coupon-issue.js'
import { pgPool, POSTGRES, uniqueName } from '../databases.js'
import { forkWorker, type Worker } from '../workers.js'
import type { BatchResult, IssueBatch, WorkerConfig } from './protocol.js'

export interface CouponContest {
  /** A label: logs and the schema name. */
  kind: string
  /** Module whose default export is a `LockFactory` (see protocol.ts). */
  factory: URL
  /** JSON config handed to the factory in every worker. */
  backend: unknown
  /** Fence the row with the lock's token. Default true; false for Redlock (no token). */
  fence?: boolean
  /** Default 1,000. */
  coupons?: number
  /** Default 1,200. */
  users?: number
  /** Worker processes. Default 4. */
  processes?: number
  /** Issues in flight per worker. Default 4. */
  concurrency?: number
  /** Bound on the whole contest. Default 240 s. */
  timeoutMs?: number
}

export interface ContestResult extends BatchResult {
  coupons: number
  users: number
  /** What PostgreSQL holds afterwards. */
  remaining: number
  rows: number
  durationMs: number
}

const COUPON_ID = 1

export async function runCouponContest(contest: CouponContest): Promise<ContestResult> {
  const {
    kind,
    coupons = 1_000,
    users = 1_200,
    processes = 4,
    concurrency = 4,
    fence = true,
    timeoutMs = 240_000,
  } = contest
  const schema = uniqueName(`coupons_${kind}`)
  const admin = await pgPool(POSTGRES.adminDatabase, { max: 2 })
  const store: CouponStore = { pool: admin, schema }
  const workers: Worker[] = []
  try {
    await createCouponTables(store, COUPON_ID, coupons)
    const config: WorkerConfig = {
      backend: contest.backend,
      database: POSTGRES.adminDatabase,
      schema,
      couponId: COUPON_ID,
      fence,
    }
    const env = { COUPON_CONFIG: JSON.stringify(config) }
    const args = [kind, fileURLToPath(contest.factory)]
    workers.push(
      ...(await Promise.all(
        Array.from({ length: processes }, () => forkWorker(new URL('./worker.ts', import.meta.url), { args, env })),
      )),
    )
    const startedAt = performance.now()
    const batches = await Promise.all(
      workers.map((worker, index) => {
        const batch: IssueBatch = {
          users: Array.from({ length: users }, (_, user) => user + 1).filter((user) => user % processes === index),
          concurrency,
        }
        return worker.request<BatchResult>(batch, timeoutMs)
      }),
    )
    const durationMs = performance.now() - startedAt
    const { remaining, issued: rows } = await countCoupons(store, COUPON_ID)
    const total = (pick: (b: BatchResult) => number) => batches.reduce((sum, b) => sum + pick(b), 0)
    const result: ContestResult = {
      coupons,
      users,
      issued: total((b) => b.issued),
      soldOut: total((b) => b.soldOut),
      fenced: total((b) => b.fenced),
      errors: batches.flatMap((b) => b.errors),
      remaining,
      rows,
      durationMs,
    }
    console.log(
      `[coupons] ${kind}: ${processes} processes × ${concurrency} in flight, ${users} users, ${coupons} coupons → issued ${result.issued} (rows ${rows}), sold out ${result.soldOut}, fenced ` +
        `${result.fenced}, errors ${result.errors.length}, ${remaining} left, ${(durationMs / 1000).toFixed(1)} s (${((result.issued + result.soldOut) / (durationMs / 1000)).toFixed(0)} issues/s)`,
    )
    return result
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()))
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {})
    await admin.end()
  }
}

/** Issued coupons equal the decremented stock, and nothing was sold past it. */
export function expectNeverOversold(result: ContestResult): void {
  expect(result.errors).toEqual([])
  expect(result.remaining).toBeGreaterThanOrEqual(0)
  expect(result.rows).toBe(result.coupons - result.remaining) // issued == decremented
  expect(result.issued).toBe(result.rows)
  expect(result.rows).toBe(Math.min(result.coupons, result.users))
  expect(result.issued + result.soldOut + result.fenced).toBe(result.users)
}
