/**
 * The chart's data, shared by the terminal and SVG renderers so both show the same
 * thing: DB queries per second over time, one series per mode.
 */
import type { ScenarioResult } from '../results.js'
import { ratePerSecond } from '../results.js'
import type { ModeName } from '../modes.js'

export interface ChartSeries {
  mode: ModeName
  /** Queries per second, one value per bucket. */
  values: number[]
}

export interface ChartData {
  bucketMs: number
  durationMs: number
  series: ChartSeries[]
}

/** Buckets small enough to show a cold burst, few enough (≤ ~60) to fit a terminal. */
export function chartData(scenario: ScenarioResult, maxPoints = 60): ChartData {
  const bucketMs = Math.max(100, Math.ceil(scenario.durationMs / maxPoints / 100) * 100)
  const points = Math.ceil(scenario.durationMs / bucketMs)
  return {
    bucketMs,
    durationMs: scenario.durationMs,
    series: scenario.modes.map((r) => ({
      mode: r.mode,
      values: ratePerSecond(r.queriesPer100ms, bucketMs).slice(0, points),
    })),
  }
}
