/**
 * Unmeasured traffic before the measured runs, through every mode in turn, until the app's
 * throughput settles. A freshly started app cluster on a 2-core machine serves well under its
 * settled req/s for its first half minute or so (the same mode, four 8 s runs in a row:
 * 7,380 → 9,750 → 13,184 → 14,342 req/s), while V8 compiles Express, the HTTP stack and each
 * mode's own path. Without a warm-up, whichever mode runs first loses, whatever it is.
 */
import { randomBytes } from 'node:crypto'
import type { AppCluster } from './app/cluster.js'
import type { RunConfig } from './app/protocol.js'
import { runTraffic } from './traffic.js'

export interface WarmUpOptions {
  app: AppCluster
  /** Each pass runs every one of these for `sliceMs`, in this order. */
  modes: readonly string[]
  /** The run a warm-up slice of `mode` configures (its runId is fresh and never collected). */
  runFor(mode: string, runId: string): RunConfig
  pathFor: () => string
  connections: number
  /** Traffic per mode per pass (ms). Default 2,000. */
  sliceMs?: number
  /** No pass starts that would end after this much time (ms), settled or not; the first always runs. Default 40,000. */
  budgetMs?: number
  /** Settled: a pass's req/s is within this share of the one before. Default 0.1. */
  tolerance?: number
}

export interface WarmUpReport {
  /** Requests per second of each pass, over all its modes. */
  passes: number[]
  settled: boolean
  elapsedMs: number
  /** Traffic per mode per pass (ms). */
  sliceMs: number
}

export async function warmUp(options: WarmUpOptions): Promise<WarmUpReport> {
  const sliceMs = options.sliceMs ?? 2_000
  const budgetMs = options.budgetMs ?? 40_000
  const tolerance = options.tolerance ?? 0.1
  const startedAt = Date.now()
  const passes: number[] = []
  const settled = () => hasSettled(passes, tolerance)
  const passMs = sliceMs * options.modes.length
  while (startsAnotherPass(passes, Date.now() - startedAt, passMs, budgetMs, tolerance)) {
    let requests = 0
    let ms = 0
    for (const mode of options.modes) {
      const runId = `warm-up-${mode.replace(/\W+/g, '-')}-${randomBytes(4).toString('hex')}`
      await options.app.configure(options.runFor(mode, runId))
      const traffic = await runTraffic({
        url: options.app.url,
        connections: options.connections,
        durationMs: sliceMs,
        pathFor: options.pathFor,
      })
      requests += traffic.requests
      ms += traffic.durationMs
    }
    passes.push(ms > 0 ? (requests * 1000) / ms : 0)
  }
  return { passes, settled: settled(), elapsedMs: Date.now() - startedAt, sliceMs }
}

/**
 * Whether to run another pass: not once settled; the first whenever there is a budget at all
 * (a budget shorter than one pass would otherwise mean no warm-up while one was asked for);
 * a later one only if it ends within the budget.
 */
export function startsAnotherPass(
  passes: readonly number[],
  elapsedMs: number,
  passMs: number,
  budgetMs: number,
  tolerance: number,
): boolean {
  // No modes (all dropped for want of Redis): a pass would take no time and await nothing, so
  // the loop would spin synchronously, pushing empty passes, until the budget ran out.
  if (budgetMs <= 0 || passMs <= 0 || hasSettled(passes, tolerance)) return false
  return passes.length === 0 || elapsedMs + passMs <= budgetMs
}

/** Whether the last pass's req/s is within `tolerance` (a share) of the pass before it. */
export function hasSettled(passes: readonly number[], tolerance: number): boolean {
  const [before, last] = passes.slice(-2)
  return before !== undefined && last !== undefined && before > 0 && Math.abs(last - before) <= tolerance * before
}

/** "warm-up: 3 passes over lock, full, 2.0 s each (req/s 7,412 → 12,380 → 12,901), settled". */
export function describeWarmUp(report: WarmUpReport, modes: readonly string[]): string {
  const rates = report.passes.map((r) => Math.round(r).toLocaleString('en-US')).join(' → ')
  return `warm-up: ${report.passes.length} ${report.passes.length === 1 ? 'pass' : 'passes'} over ${modes.join(', ')}, ${(report.sliceMs / 1000).toFixed(1)} s each (req/s ${rates}), ${report.settled ? 'settled' : 'not settled within its budget'}`
}
