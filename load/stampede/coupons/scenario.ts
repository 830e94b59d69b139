/**
 * `npm run load -- --scenario coupons`: the seeds' coupon test as a load scenario.
 * `processes` app instances issue `coupons` coupons to `users` users from one PostgreSQL
 * row, once per contender (no lock, the seeds' spin lock, withLock, …), and the report
 * says for each whether it oversold and by how much, issues per second, and p50/p99 per
 * issue (lock wait + transaction, as a user would see it).
 */
import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { countCoupons, createCouponTables } from '../../../examples/coupon-issue.js'
import { forkTs } from '../../shared/fork-ts.js'
import { renderGrid } from '../../shared/grid.js'
import { CONTENDERS } from './contenders.js'
import type { FromWorker, ToWorker } from './protocol.js'

export interface CouponScenarioOptions {
  redisUrl: string
  databaseUrl: string
  contenders: string[]
  /** A module (absolute path) exporting more `CONTENDERS` by name, for the worker processes (load/compare/). */
  contenderModule?: string
  coupons?: number
  users?: number
  processes?: number
  /** Issues in flight per process. */
  concurrency?: number
}

export interface ContenderResult {
  contender: string
  issued: number
  remaining: number
  oversold: number
  soldOut: number
  gaveUp: number
  /** Optimistic retries, summed over every issue (0 for the locks, whose waiting is inside). */
  retries: number
  errors: string[]
  issuedPerSecond: number
  p50Ms: number
  p99Ms: number
  durationMs: number
}

export async function runCouponScenario(options: CouponScenarioOptions): Promise<ContenderResult[]> {
  const { coupons = 1_000, users = 1_200, processes = 4, concurrency = 4 } = options
  const schema = `sg_load_coupons_${process.pid}`
  const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 2 })
  const env = {
    COUPON_DATABASE_URL: options.databaseUrl,
    COUPON_SCHEMA: schema,
    COUPON_REDIS_URL: options.redisUrl,
    COUPON_CONTENDER_MODULE: options.contenderModule ?? '',
  }
  const workerFile = fileURLToPath(new URL('./worker.ts', import.meta.url))
  const workers: ChildProcess[] = []
  const results: ContenderResult[] = []
  try {
    for (let i = 0; i < processes; i++) workers.push(forkTs(workerFile, env))
    await Promise.all(workers.map((worker) => next(worker, 60_000)))
    for (const contender of options.contenders) {
      await createCouponTables({ pool, schema }, 1, coupons)
      const startedAt = performance.now()
      const replies = await Promise.all(
        workers.map((worker, index) => {
          const message: ToWorker = {
            type: 'run',
            contender,
            users: Array.from({ length: users }, (_, u) => u + 1).filter((u) => u % processes === index),
            concurrency,
          }
          worker.send(message)
          return next(worker, 600_000)
        }),
      )
      const durationMs = performance.now() - startedAt
      const { issued, remaining } = await countCoupons({ pool, schema }, 1)
      const latencies = replies.flatMap((r) => (r.type === 'done' ? r.latenciesMs : [])).sort((a, b) => a - b)
      const sum = (outcome: string) =>
        replies.reduce((total, r) => total + (r.type === 'done' ? (r.outcomes[outcome] ?? 0) : 0), 0)
      results.push({
        contender,
        issued,
        remaining,
        oversold: Math.max(0, issued - coupons),
        soldOut: sum('sold-out'),
        gaveUp: sum('gave-up'),
        retries: replies.reduce((total, r) => total + (r.type === 'done' ? r.retries : 0), 0),
        errors: replies.flatMap((r) => (r.type === 'done' ? r.errors : [])),
        issuedPerSecond: issued / (durationMs / 1000),
        p50Ms: quantile(latencies, 0.5),
        p99Ms: quantile(latencies, 0.99),
        durationMs,
      })
    }
  } finally {
    for (const worker of workers) worker.disconnect()
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {})
    await pool.end()
  }
  return results
}

function next(worker: ChildProcess, timeoutMs: number): Promise<FromWorker> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`coupon worker ${worker.pid}: no answer within ${timeoutMs} ms`)),
      timeoutMs,
    )
    worker.once('message', (message: FromWorker) => {
      clearTimeout(timer)
      resolve(message)
    })
  })
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

export function renderCouponTable(results: ContenderResult[], coupons: number, users: number): string {
  const rows = results.map((r) => [
    r.contender,
    String(r.issued),
    String(r.remaining),
    r.oversold > 0 || r.remaining < 0
      ? `OVERSOLD by ${Math.max(r.oversold, -r.remaining)}`
      : r.issued + r.remaining === coupons
        ? 'correct'
        : `MISMATCH (${r.issued} + ${r.remaining} ≠ ${coupons})`,
    r.issuedPerSecond.toFixed(0),
    r.p50Ms.toFixed(1),
    r.p99Ms.toFixed(1),
    String(r.retries),
    String(r.gaveUp + r.errors.length),
  ])
  return renderGrid(
    [
      'contender',
      'issued',
      'stock left',
      `correctness (${coupons} coupons, ${users} users)`,
      'issued/s',
      'p50 ms',
      'p99 ms',
      'retries',
      'gave up/errors',
    ],
    rows,
  )
}

export const COUPON_CONTENDERS = Object.keys(CONTENDERS)
