/**
 * The shape of a load-test run's results (also what load/results/<timestamp>.json holds),
 * and the arithmetic that turns raw 100 ms query bins into the reported numbers.
 */
import os from 'node:os'
import { BIN_MS, type QueryBins } from './app/protocol.js'
import type { ModeName } from './modes.js'
import type { ScenarioName } from './scenarios.js'
import type { TrafficResult } from './traffic.js'
import type { PhaseSummary } from './report/phase-summary.js'
import type { WarmUpReport } from './warm-up.js'

export interface ModeResult {
  mode: ModeName
  description: string
  /** Every query the database received during the run (failed ones included). */
  dbQueries: number
  failedQueries: number
  /** Most queries in any sliding 1 s window. */
  peakQueriesPerSec: number
  /** Queries per 100 ms bin from the start of the traffic (index 0 = first 100 ms). */
  queriesPer100ms: number[]
  /** queries(none) / queries(this mode); null when `none` was not run. */
  reductionVsNone: number | null
  traffic: TrafficResult
  /** Requests answered with a stale value (stampede-guard's counter; 0 for none/naive). */
  staleServed: number
  /** staleServed / requests answered. */
  staleShare: number
  /** Age of the oldest value served, in ms since the database read it (all workers). */
  oldestServedMs: number
  /** stampede-guard's counters summed over all workers, as reported by cache.stats(). */
  cacheStats: Record<string, number>
  /** Per-phase timings and command counts of a probed run (the zipf scenario's). */
  phases?: PhaseSummary
}

export interface ScenarioResult {
  name: ScenarioName
  title: string
  explain: string
  durationMs: number
  connections: number
  modes: ModeResult[]
  /** Set when the scenario could not run in this setup (e.g. outage without a private Redis). */
  skipped?: string
}

export interface MachineInfo {
  cpus: number
  cpuModel: string
  memoryGiB: number
  node: string
  platform: string
}

export interface LoadResults {
  startedAt: string
  elapsedMs: number
  machine: MachineInfo
  settings: {
    workers: number
    dbLatencyMs: number
    timeScale: number
    redis: string
    database: string
    modes: ModeName[]
    /** The unmeasured warm-up before the first run (load/stampede/warm-up.ts); null: none (--warm-up 0). */
    warmUp?: WarmUpReport | null
  }
  notes: string[]
  scenarios: ScenarioResult[]
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus()
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
  }
}

/** Absolute-time bins → an array indexed from the traffic start. Queries just before it (none expected) go to bin 0. */
export function binsFromStart(bins: QueryBins, trafficStartMs: number, durationMs: number): number[] {
  const length = Math.ceil(durationMs / BIN_MS)
  const out = new Array<number>(length).fill(0)
  for (const [bin, count] of Object.entries(bins)) {
    const index = Math.max(0, Math.floor((Number(bin) * BIN_MS - trafficStartMs) / BIN_MS))
    while (out.length <= index) out.push(0)
    out[index]! += count
  }
  return out
}

/** Largest sum over any window of 1 s (10 consecutive 100 ms bins). */
export function peakPerSecond(per100ms: number[]): number {
  const window = Math.round(1000 / BIN_MS)
  let sum = 0
  let peak = 0
  for (let i = 0; i < per100ms.length; i++) {
    sum += per100ms[i]!
    if (i >= window) sum -= per100ms[i - window]!
    peak = Math.max(peak, sum)
  }
  return peak
}

/** Re-bins 100 ms counts into `bucketMs` buckets, as queries per second. */
export function ratePerSecond(per100ms: number[], bucketMs: number): number[] {
  const per = Math.max(1, Math.round(bucketMs / BIN_MS))
  const out: number[] = []
  for (let i = 0; i < per100ms.length; i += per) {
    let sum = 0
    for (let j = i; j < Math.min(i + per, per100ms.length); j++) sum += per100ms[j]!
    out.push((sum * 1000) / (per * BIN_MS))
  }
  return out
}

/**
 * Stale answers from stampede-guard's counters. Read defensively: the counter's name is
 * the core's to choose (src/events.ts).
 */
export function staleServedFrom(stats: Record<string, number>): number {
  return stats.stale ?? stats.staleHits ?? stats.staleServed ?? 0
}
