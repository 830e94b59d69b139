/**
 * The shared part of the failover-under-load tests (Cluster and Sentinel): fork the app
 * instances (test/fixtures/failover-worker.ts), keep them calling getOrLoad, run a
 * failover in the middle, and judge what happened from the load log kept in a separate
 * "database" redis that no failover touches.
 */
import { writeFileSync } from 'node:fs'
import type { Redis } from 'ioredis'
import { expect } from 'vitest'
import type { FailoverReport, LoadRecord, StartRequest } from '../fixtures/failover-worker.js'
import { until } from './timing.js'
import { forkWorker, type Worker } from './workers.js'

const WORKER = new URL('../fixtures/failover-worker.ts', import.meta.url)

export interface FailoverRun {
  reports: FailoverReport[]
  /** Per key: loads that started while the previous load's value was still fresh (or overlapping it). */
  extraLoads: Record<string, number>
  loads: Record<string, LoadRecord[]>
  /** When the failover was triggered and when the caller's `failover()` resolved (epoch ms). */
  failedAt: number
  recoveredAt: number
  /** Last Redis error any worker saw, ms after the failover was triggered (0: none). */
  lastRedisErrorMs: number
}

/**
 * The traffic of every failover run: 30 keys, every other call on the first, ttl 1 s so loads
 * are always under way. Without ttl jitter: a value is fresh for exactly the ttl, so a load
 * that starts before the previous one's end + ttl is one that did not coalesce (with the
 * default 5 % jitter a value may go stale 50 ms early, and its reload looked like an extra one).
 */
export const FAILOVER_KEYS = Array.from({ length: 30 }, (_, i) => `item:${i}`)
export const FAILOVER_HOT_KEY = FAILOVER_KEYS[0]!
const TTL_MS = 1_000

export interface FailoverRunOptions {
  /** Redis connection env for the worker (CLUSTER_NODES or SENTINELS + SENTINEL_NAME). */
  env: Record<string, string>
  /** The "database": a standalone redis no failover touches. */
  db: Redis
  dbUrl: string
  namespace: string
  processes?: number
  /** Triggers the failover and resolves once the new primary serves. */
  failover(): Promise<void>
}

/** Loads that began before `end + ttl` of the previous load of the same key: its value was fresh, so someone did not coalesce. */
function extraLoadsOf(loads: LoadRecord[], ttlMs: number): { load: LoadRecord; previous: LoadRecord }[] {
  const sorted = [...loads].sort((a, b) => a.start - b.start)
  const extra: { load: LoadRecord; previous: LoadRecord }[] = []
  for (let i = 1; i < sorted.length; i++)
    if (sorted[i]!.start < sorted[i - 1]!.end + ttlMs - 20) extra.push({ load: sorted[i]!, previous: sorted[i - 1]! })
  return extra
}

export async function runFailoverUnderLoad(options: FailoverRunOptions): Promise<FailoverRun> {
  await options.db.flushall()
  const { db } = options
  const [keys, hotKey, ttlMs] = [FAILOVER_KEYS, FAILOVER_HOT_KEY, TTL_MS]
  const workers: Worker[] = await Promise.all(
    Array.from({ length: options.processes ?? 4 }, () =>
      forkWorker(WORKER, {
        env: {
          DB_URL: options.dbUrl,
          CACHE_OPTIONS: JSON.stringify({ ttl: ttlMs, ttlJitter: 0, namespace: options.namespace }),
          ...options.env,
        },
      }),
    ),
  )
  try {
    const request: StartRequest = { op: 'start', keys, hotKey, concurrency: 4, loaderMs: 20, pauseMs: 10 }
    await Promise.all(workers.map((w) => w.request(request)))
    // Warm: every key loaded, then one more ttl of steady traffic so reloads are under way.
    await until(
      async () => (await Promise.all(keys.map((k) => db.exists(`version:${k}`)))).every((n) => n === 1),
      'every key to be loaded',
      30_000,
    )
    const warmVersion = Number(await db.get(`version:${hotKey}`))
    await until(
      async () => Number(await db.get(`version:${hotKey}`)) >= warmVersion + 2,
      'two reloads of the hot key',
      30_000,
    )

    const failedAt = Date.now()
    await options.failover()
    const recoveredAt = Date.now()
    // Run on until every key has been reloaded twice after the new primary took over.
    const after = new Map(await Promise.all(keys.map(async (k) => [k, Number(await db.get(`version:${k}`))] as const)))
    await until(
      async () => {
        const now = await Promise.all(keys.map(async (k) => Number(await db.get(`version:${k}`))))
        return keys.every((k, i) => now[i]! >= after.get(k)! + 2)
      },
      'every key to be reloaded twice after the failover',
      30_000,
    )

    const reports = await Promise.all(workers.map((w) => w.request<FailoverReport>({ op: 'stop' }, 60_000)))
    const loads: Record<string, LoadRecord[]> = {}
    const extraLoads: Record<string, number> = {}
    for (const key of keys) {
      loads[key] = (await db.lrange(`loads:${key}`, 0, -1)).map((line) => JSON.parse(line) as LoadRecord)
      extraLoads[key] = extraLoadsOf(loads[key], ttlMs).length
    }
    const lastError = Math.max(0, ...reports.flatMap((r) => r.redisErrors.map((e) => e.at)))
    return {
      reports,
      extraLoads,
      loads,
      failedAt,
      recoveredAt,
      lastRedisErrorMs: lastError === 0 ? 0 : lastError - failedAt,
    }
  } finally {
    await Promise.all(workers.map((w) => w.stop()))
  }
}

/** A one-line account of a run for the test log (and the report). */
export function describeRun(name: string, run: FailoverRun): string {
  const calls = run.reports.reduce((n, r) => n + r.calls, 0)
  const errors = run.reports.flatMap((r) => r.errors)
  const extra = Object.values(run.extraLoads).reduce((n, x) => n + x, 0)
  const worst = Math.max(...Object.values(run.extraLoads))
  const totalLoads = Object.values(run.loads).reduce((n, l) => n + l.length, 0)
  const stats = run.reports.map((r) => r.stats)
  const sum = (name: keyof FailoverReport['stats']) => stats.reduce((n, s) => n + s[name], 0)
  return (
    `[${name}] calls=${calls} failed=${errors.length} loads=${totalLoads} extraLoads=${extra} (worst key ${worst}) ` +
    `regressions=${run.reports.reduce((n, r) => n + r.regressions.length, 0)} failover=${run.recoveredAt - run.failedAt}ms ` +
    `lastRedisError=+${run.lastRedisErrorMs}ms slowestCall=${Math.max(...run.reports.map((r) => r.slowestMs))}ms ` +
    `redisErrors=${sum('redis-error')} circuitOpen=${sum('circuit-open')} fenced=${sum('fenced')} lockLost=${sum('lock-lost')}`
  )
}

/**
 * Why a key was loaded more than once: each extra load and the one before it (who ran it,
 * when, relative to the failover), and what every process's cache saw around them (that
 * key's events, and Redis errors and breaker changes).
 */
export function explainExtraLoads(run: FailoverRun, key: string): string {
  const lines = [`${key}: failover triggered at +0ms, served again at ${relative(run, run.recoveredAt)}`]
  for (const { load, previous } of extraLoadsOf(run.loads[key] ?? [], TTL_MS)) {
    lines.push(`  extra load ${describeLoad(run, load)}, after ${describeLoad(run, previous)}`)
    lines.push(...timelines(run, key, previous.start - 1_500, load.end + 300))
  }
  return lines.join('\n')
}

/** The first regression of each process, the loads of its key around it, and what the caches saw. */
export function explainRegressions(run: FailoverRun): string {
  const lines: string[] = []
  for (const report of run.reports) {
    const first = report.regressions[0]
    if (!first) continue
    lines.push(
      `pid ${report.pid}: ${report.regressions.length} regressions, first ${first.key} got ` +
        `v${first.got} after v${first.after} (${first.outcome}) at ${relative(run, first.at)}`,
    )
    const loads = (run.loads[first.key] ?? []).filter((l) => l.version >= first.got - 1 && l.version <= first.after + 1)
    for (const load of loads) lines.push(`  load ${describeLoad(run, load)}`)
    lines.push(...timelines(run, first.key, Math.min(first.at, ...loads.map((l) => l.start)) - 1_000, first.at + 100))
  }
  return lines.join('\n')
}

const relative = (run: FailoverRun, t: number) => `${t - run.failedAt >= 0 ? '+' : ''}${t - run.failedAt}ms`
const describeLoad = (run: FailoverRun, l: LoadRecord) =>
  `v${l.version} pid ${l.pid} ${relative(run, l.start)}..${relative(run, l.end)}${l.background ? ' background' : ''}${l.uncached ? ' uncached' : ''}`

/** Each process's events for `key` (and Redis errors and breaker changes) between `from` and `to`. */
function timelines(run: FailoverRun, key: string, from: number, to: number): string[] {
  return run.reports.map((report) => {
    const seen = report.timeline.filter((e) => e.at >= from && e.at <= to && (e.key === undefined || e.key === key))
    // Repeated Redis errors: the first few say enough.
    const shown = seen.filter(
      (e, i) => e.event !== 'redis-error' || seen.slice(0, i).filter((p) => p.event === 'redis-error').length < 5,
    )
    return (
      `    pid ${report.pid}: ${shown.map((e) => `${relative(run, e.at)} ${e.event}${e.detail ? `(${e.detail})` : ''}`).join(', ') || '(nothing)'}` +
      (shown.length < seen.length ? ` …${seen.length - shown.length} more redis errors` : '')
    )
  })
}

/**
 * The goals: no failed call, no caller given a version older than one a finished call had,
 * at most one extra load per key for the one failover, and no call near waitTimeout (10 s):
 * waiters re-subscribed or polled instead of hanging.
 */
/** `maxExtraLoadsPerKey`: 1 (the issue's goal: one lost commit per failover), unless a run loses data twice. */
export function expectFailoverGoals(run: FailoverRun, maxExtraLoadsPerKey = 1): void {
  if (process.env.FAILOVER_DUMP) writeFileSync(`${process.env.FAILOVER_DUMP}-${Date.now()}.json`, JSON.stringify(run))
  const overLoaded = Object.entries(run.extraLoads).filter(([, extra]) => extra > maxExtraLoadsPerKey)
  // FAILOVER_EXPLAIN=1 explains every extra load, within the goal or not.
  const explained = process.env.FAILOVER_EXPLAIN
    ? Object.entries(run.extraLoads).filter(([, extra]) => extra > 0)
    : overLoaded
  for (const [key] of explained) console.log(explainExtraLoads(run, key))
  const regressions = run.reports.flatMap((r) =>
    r.regressions.map(
      ({ key, got, after, outcome }) => `${key}: got v${got} after v${after} (${outcome}) in pid ${r.pid}`,
    ),
  )
  if (regressions.length > 0) console.log(explainRegressions(run))
  expect(run.reports.flatMap((r) => r.errors)).toEqual([])
  expect(regressions).toEqual([])
  expect(overLoaded).toEqual([])
  expect(Math.max(...run.reports.map((r) => r.slowestMs))).toBeLessThan(8_000)
}
