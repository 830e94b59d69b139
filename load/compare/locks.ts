/**
 * Benchmark 3, the locks, for each lock peer (lock-peers.ts):
 *
 * 1. acquire and release latency, uncontended, in this process;
 * 2. hand-off under contention: 4 processes loop acquire → hold 2 ms → release → 5 ms of
 *    other work, on one key, for a fixed time. For every release while another process
 *    was waiting, the hand-off is the time from the release starting to the first of those
 *    waiters having the lock (the releaser re-taking it in between does not count as
 *    serving them: a polling lock's waiters keep waiting). Holds/s is the lock's throughput;
 *    a hold that starts before the previous one ended is counted as an overlap;
 *  3. the coupon scenario (load/stampede/coupons/): issued/s with each lock around the same
 *    PostgreSQL transaction.
 */
import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { handoffs, quantile, type Hold } from './arithmetic.js'
import { forkTs, runCouponScenario, type ContenderResult } from './from-load.js'
import { HANDOFF_KEY, LATENCY_KEY, lockPeer, type LockEnv } from './lock-peers.js'
import type { FromContender, ToContender } from './lock-contender.js'

export interface LockOptions extends LockEnv {
  peers: string[]
  iterations: number
  contentionMs: number
  coupons: boolean
  couponCount: number
  couponUsers: number
}

export interface LockRow {
  lock: string
  acquireP50Ms: number
  acquireP99Ms: number
  releaseP50Ms: number
  handoffP50Ms: number
  handoffP99Ms: number
  handoffs: number
  holdsPerSecond: number
  overlaps: number
  failures: number
  firstError?: string
}

export interface LockResults {
  processes: number
  rows: LockRow[]
  /** Locks (or the coupon scenario) that could not run, and why. */
  failed: { lock: string; error: string }[]
  coupons: ContenderResult[]
  couponCount: number
  couponUsers: number
}

const PROCESSES = 4
const HOLD_MS = 2
const THINK_MS = 5

export async function runLocks(options: LockOptions): Promise<LockResults> {
  const env: LockEnv = { redisUrl: options.redisUrl, databaseUrl: options.databaseUrl }
  const file = fileURLToPath(new URL('./lock-contender.ts', import.meta.url))
  const children: ChildProcess[] = Array.from({ length: PROCESSES }, () =>
    forkTs(file, { COMPARE_REDIS_URL: env.redisUrl, COMPARE_DATABASE_URL: env.databaseUrl }),
  )
  const rows: LockRow[] = []
  const failed: { lock: string; error: string }[] = []
  try {
    await Promise.all(children.map((child) => next(child, 'ready', 60_000)))
    for (const name of options.peers) {
      const peer = lockPeer(name)
      try {
        await peer.prepare?.(env)
        const measured = await latency(await peer.create(env), options.iterations)
        rows.push({ lock: name, ...measured, ...(await contention(children, name, options.contentionMs)) })
      } catch (error) {
        // A lock whose server is missing (PostgreSQL down) is a line that says so, not a lost run.
        failed.push({ lock: name, error: String((error as Error)?.message ?? error) })
      } finally {
        await peer.cleanup?.(env).catch(() => {})
      }
    }
  } finally {
    for (const child of children) if (child.connected) child.disconnect()
  }
  let coupons: ContenderResult[] = []
  if (options.coupons) {
    const peers = options.peers.map(lockPeer)
    try {
      const named = await runCouponScenario({
        redisUrl: env.redisUrl,
        databaseUrl: env.databaseUrl,
        contenders: peers.map((p) => p.coupon),
        contenderModule: fileURLToPath(new URL('./lock-peers.ts', import.meta.url)),
        coupons: options.couponCount,
        users: options.couponUsers,
      })
      // In the table, each coupon contender is named by its lock.
      coupons = named.map((r, i) => ({ ...r, contender: peers[i]!.name }))
    } catch (error) {
      failed.push({ lock: 'coupon scenario', error: String((error as Error)?.message ?? error) })
    }
  }
  return {
    processes: PROCESSES,
    rows,
    failed,
    coupons,
    couponCount: options.couponCount,
    couponUsers: options.couponUsers,
  }
}

async function latency(
  lock: Awaited<ReturnType<ReturnType<typeof lockPeer>['create']>>,
  iterations: number,
): Promise<Pick<LockRow, 'acquireP50Ms' | 'acquireP99Ms' | 'releaseP50Ms'>> {
  const acquireMs: number[] = []
  const releaseMs: number[] = []
  try {
    for (let i = -20; i < iterations; i++) {
      const startedAt = performance.now()
      const release = await lock.acquire(LATENCY_KEY, 1_000)
      const acquiredAt = performance.now()
      await release()
      if (i < 0) continue // warm-up: connections, script cache
      acquireMs.push(acquiredAt - startedAt)
      releaseMs.push(performance.now() - acquiredAt)
    }
  } finally {
    await lock.close()
  }
  return {
    acquireP50Ms: quantile(acquireMs, 0.5),
    acquireP99Ms: quantile(acquireMs, 0.99),
    releaseP50Ms: quantile(releaseMs, 0.5),
  }
}

async function contention(
  children: ChildProcess[],
  lock: string,
  durationMs: number,
): Promise<Omit<LockRow, 'lock' | 'acquireP50Ms' | 'acquireP99Ms' | 'releaseP50Ms'>> {
  // Every process starts at the same moment (they all have a second to build the lock).
  const startMs = performance.timeOrigin + performance.now() + 1_000
  const replies = await Promise.all(
    children.map((child) => {
      const done = next(child, 'done', durationMs + 60_000)
      const message: ToContender = {
        type: 'run',
        lock,
        key: HANDOFF_KEY,
        startMs,
        untilMs: startMs + durationMs,
        holdMs: HOLD_MS,
        thinkMs: THINK_MS,
      }
      child.send(message)
      return done
    }),
  )
  const holds: Hold[] = replies.flatMap((reply, process) =>
    reply.holds.map(([askedAt, acquiredAt, releasedAt]) => ({ process, askedAt, acquiredAt, releasedAt })),
  )
  const { handoffMs, overlaps } = handoffs(holds)
  const span =
    holds.length > 1
      ? Math.max(...holds.map((h) => h.releasedAt)) - Math.min(...holds.map((h) => h.acquiredAt))
      : durationMs
  const firstError = replies.find((r) => r.firstError)?.firstError
  return {
    handoffP50Ms: quantile(handoffMs, 0.5),
    handoffP99Ms: quantile(handoffMs, 0.99),
    handoffs: handoffMs.length,
    holdsPerSecond: holds.length / (span / 1000),
    overlaps,
    failures: replies.reduce((sum, r) => sum + r.failures, 0),
    ...(firstError ? { firstError } : {}),
  }
}

function next<T extends FromContender['type']>(
  child: ChildProcess,
  type: T,
  timeoutMs: number,
): Promise<Extract<FromContender, { type: T }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', listener)
      reject(new Error(`lock contender ${child.pid}: no '${type}' within ${timeoutMs} ms`))
    }, timeoutMs)
    const listener = (message: FromContender) => {
      if (message.type !== type) return
      clearTimeout(timer)
      child.off('message', listener)
      resolve(message as Extract<FromContender, { type: T }>)
    }
    child.on('message', listener)
  })
}
