/**
 * bench:lock's contention phase: `processes` processes take one key `holds` times each,
 * holding it 3–7 ms (the setting: 4 × 25). Hand-off = when the next holder got the
 * lock − when the previous one began to release it, over every consecutive pair of holds,
 * whichever processes they were in: how long the lock sat idle between holders while
 * others were waiting. Throughput = holds per second of the whole run.
 *
 * Before the measured holds, every process contends for a warm-up key, 10 holds each (unmeasured):
 * the first hand-offs otherwise time the JIT, the script cache and the first subscription.
 * No process closes until every process has reported, so that none is timed while others
 * tear down (both showed as the slowest hand-offs: the first and the last).
 */
import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { forkTs } from '../shared/fork-ts.js'
import type { ContentionReport, ToContention } from './protocol.js'

export interface ContentionResult {
  handoffMs: number[]
  /** How late each hold's timer fired, in every process: the machine's wake-up delay, which any hand-off also pays. */
  timerLateMs: number[]
  /** The slowest hand-offs, each with the GC pauses that overlapped it in the releasing or the taking process. */
  slowest: { ms: number; gcMs: number }[]
  /** Share of hand-offs that went to another process (the rest: the releasing process took it again). */
  toOtherProcess: number
  /** Consecutive holds that overlapped (the next got it before the previous began to release): two holders. */
  overlaps: number
  holdsPerSecond: number
  errors: string[]
}

function next<T>(child: ChildProcess, type: string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`contention process: no '${type}' in ${timeoutMs} ms`)), timeoutMs)
    const listener = (message: { type: string }) => {
      if (message.type !== type) return
      clearTimeout(timer)
      child.off('message', listener)
      resolve(message as T)
    }
    child.on('message', listener)
  })
}

export async function measureContention(
  contender: string,
  env: NodeJS.ProcessEnv,
  processes: number,
  holds: number,
  warmUpHolds = 10,
): Promise<ContentionResult> {
  const file = fileURLToPath(new URL('./contention-process.ts', import.meta.url))
  const children = Array.from({ length: processes }, () => forkTs(file, env))
  const key = `bench:contention:${contender.replace(/[^a-z0-9]+/gi, '-')}:${process.pid}`
  try {
    const ready = children.map((child) => next(child, 'ready', 60_000))
    for (const child of children)
      child.send({ type: 'start', contender, key, holds, warmUpHolds } satisfies ToContention)
    await Promise.all(ready)
    const warm = children.map((child) => next(child, 'warm', 300_000))
    for (const child of children) child.send({ type: 'warm-up' } satisfies ToContention)
    await Promise.all(warm)
    const done = children.map((child) => next<ContentionReport>(child, 'done', 300_000))
    for (const child of children) child.send({ type: 'go' } satisfies ToContention)
    const reports = await Promise.all(done)
    for (const child of children) child.send({ type: 'close' } satisfies ToContention)
    const all = reports.flatMap((report) => report.holds).sort((a, b) => a.acquiredAt - b.acquiredAt)
    const handoffMs = all.slice(1).map((hold, i) => hold.acquiredAt - all[i]!.releasedAt)
    const pausesOf = new Map(reports.map((report, i) => [report.holds[0]?.pid ?? -i, report.gcPauses]))
    const gcDuring = (from: number, to: number, pids: number[]) =>
      pids
        .flatMap((pid) => pausesOf.get(pid) ?? [])
        .filter((pause) => pause.at < to && pause.at + pause.ms > from)
        .reduce((sum, pause) => sum + pause.ms, 0)
    const slowest = handoffMs
      .map((ms, i) => ({
        ms,
        gcMs: gcDuring(all[i]!.releasedAt, all[i + 1]!.acquiredAt, [all[i]!.pid, all[i + 1]!.pid]),
      }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 3)
    const spanS = all.length > 1 ? (all.at(-1)!.releasedAt - all[0]!.acquiredAt) / 1000 : Number.NaN
    return {
      handoffMs,
      timerLateMs: all.map((hold) => hold.timerLateMs),
      slowest,
      overlaps: handoffMs.filter((ms) => ms < 0).length,
      toOtherProcess: all.slice(1).filter((hold, i) => hold.pid !== all[i]!.pid).length / Math.max(1, all.length - 1),
      holdsPerSecond: all.length / spanS,
      errors: reports.flatMap((report) => (report.error ? [report.error] : [])),
    }
  } finally {
    for (const child of children) if (child.connected) child.disconnect()
  }
}
