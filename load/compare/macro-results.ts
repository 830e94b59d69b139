/**
 * The macro-benchmark's results (macro.ts runs it; tables.ts and results-file.ts show it), in
 * their own file so that what shows them, and its tests, load no cache peer.
 */
import type { ScenarioName, TrafficResult } from './from-load.js'

export interface MacroRow {
  peer: string
  dbQueries: number
  failedQueries: number
  peakQueriesPerSec: number
  /** dbQueries / ours (stampede-guard's) in the same scenario; null when ours did not run. */
  queriesVsOurs: number | null
  traffic: TrafficResult
  /** Non-2xx answers + connection errors. */
  errorsServed: number
  oldestServedMs: number
  staleServed: number
  staleShare: number
  /** The app workers' CPU per request served (µs): what throughput costs, robust to a noisy machine. */
  workerCpuUsPerRequest: number
  /** Redis server CPU per request served (µs, INFO cpu). */
  redisCpuUsPerRequest: number
  /** Command → calls per request served (INFO commandstats; a script's own calls are counted too). */
  redisCallsPerRequest: Record<string, number>
}

export interface MacroScenario {
  name: ScenarioName
  title: string
  durationMs: number
  connections: number
  ttlMs: number
  staleMs: number
  /** Per peer, its median round by req/s (its only round without --repeat). */
  rows: MacroRow[]
  /** Every round's rows, in the peers' order: adjacent runs, so ratios within a round are fair. */
  rounds: MacroRow[][]
}

export const OURS = 'stampede-guard'
