/**
 * DB queries per second over time in the terminal (asciichart), one colored line per mode.
 *
 * The y axis is logarithmic (log10(1 + q/s)), labelled in real q/s: `none` runs at
 * thousands of queries per second and `lock` at one, and on a linear axis the modes that
 * matter would be a flat line at zero.
 */
import asciichart from 'asciichart'
import type { ModeName } from '../modes.js'
import type { ScenarioResult } from '../results.js'
import { chartData } from './series.js'
import { useColor } from '../../shared/format.js'

export const MODE_COLORS: Record<ModeName, string> = {
  none: asciichart.red,
  naive: asciichart.yellow,
  spinlock: asciichart.magenta,
  lock: asciichart.blue,
  full: asciichart.green,
}

const toLog = (q: number) => Math.log10(1 + q)
const fromLog = (y: number) => 10 ** y - 1

export function renderTerminalChart(
  scenario: ScenarioResult,
  options: { height?: number; color?: boolean } = {},
): string {
  const color = options.color ?? useColor()
  const data = chartData(scenario)
  if (data.series.length === 0) return ''
  const max = Math.max(1, ...data.series.flatMap((s) => s.values))
  const config = (height: number, colors?: string[]) => ({
    height,
    min: 0,
    max: toLog(max),
    colors,
    format: (y: number) => formatRate(fromLog(y)).padStart(LABEL_WIDTH),
  })
  const points = data.series[0]!.values.length
  const axisPad = ' '.repeat(LABEL_WIDTH + 1)
  const end = `${(data.durationMs / 1000).toFixed(0)} s`
  const axis = `${axisPad}0 s${' '.repeat(Math.max(1, points - 3 - end.length))}${end}`
  const title = `DB queries per second over time, averaged over ${data.bucketMs} ms buckets (log scale, same for every mode)`

  if (color) {
    // One chart, one colored line per mode.
    const plot = asciichart.plot(
      data.series.map((s) => s.values.map(toLog)),
      config(
        options.height ?? 10,
        data.series.map((s) => MODE_COLORS[s.mode]),
      ),
    )
    const legend = data.series.map((s) => `${MODE_COLORS[s.mode]}━━${asciichart.reset} ${s.mode}`).join('   ')
    return [title, plot, axis, `${axisPad}${legend}`].join('\n')
  }
  // No colors (pipe, CI log, NO_COLOR): overlapping lines would be indistinguishable, so
  // one small chart per mode, stacked, on the same scale.
  const blocks = data.series.map((s) =>
    [`${axisPad}${s.mode}`, asciichart.plot(s.values.map(toLog), config(4))].join('\n'),
  )
  return [title, ...blocks, axis].join('\n')
}

const LABEL_WIDTH = 7

function formatRate(q: number): string {
  if (q < 0.5) return '0'
  if (q < 10) return q.toFixed(1)
  if (q < 10_000) return Math.round(q).toString()
  return `${(q / 1000).toFixed(0)}k`
}
