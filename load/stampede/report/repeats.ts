/**
 * A scenario run with `--repeat N`: per mode, the median over its rounds of req/s, p99 and
 * loads, and each round's ratio to the baseline mode of the same round (the spin lock when it
 * ran, else the first mode). Rounds are adjacent in time, so a ratio within one round is what
 * a shared, noisy machine still measures fairly.
 */
import type { ModeResult, ScenarioResult } from '../results.js'
import { renderGrid } from '../../shared/grid.js'

export function renderRepeats(scenario: ScenarioResult): string {
  const names = [...new Set(scenario.modes.map((m) => m.mode))]
  const rounds = scenario.modes.length / names.length
  if (rounds < 2 || !Number.isInteger(rounds)) return ''
  const baseline = names.includes('spinlock') ? 'spinlock' : names[0]!
  const round = (i: number) => scenario.modes.slice(i * names.length, (i + 1) * names.length)
  const rows = names.map((name) => {
    const runs = scenario.modes.filter((m) => m.mode === name)
    const ratios = Array.from({ length: rounds }, (_, i) => {
      const r = round(i)
      const mine = r.find((m) => m.mode === name)!
      const base = r.find((m) => m.mode === baseline)!
      return [mine.traffic.reqPerSec / base.traffic.reqPerSec, mine.traffic.latencyMs.p99 / base.traffic.latencyMs.p99]
    })
    return [
      name,
      median(runs.map((m) => m.traffic.reqPerSec)).toFixed(0),
      median(runs.map((m) => m.traffic.latencyMs.p99)).toFixed(0),
      median(runs.map(loadsVsIdeal)).toFixed(2),
      ratios.map(([rps]) => rps!.toFixed(2)).join(' '),
      ratios.map(([, p99]) => p99!.toFixed(2)).join(' '),
    ]
  })
  return renderGrid(
    ['mode', 'median req/s', 'median p99 ms', 'loads/ideal', `req/s ÷ ${baseline}, per round`, `p99 ÷ ${baseline}`],
    rows,
  )
}

const loadsVsIdeal = (m: ModeResult) => (m.phases && m.phases.idealLoads > 0 ? m.dbQueries / m.phases.idealLoads : NaN)

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? NaN
}
