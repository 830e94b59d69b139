/**
 * The same chart as an SVG file, rendered headlessly by Vega-Lite → Vega → view.toSVG()
 * (no browser, no canvas, no native module).
 */
import * as vega from 'vega'
import * as vegaLite from 'vega-lite'
import type { ScenarioResult } from '../results.js'
import { chartData } from './series.js'

/** Same colors as the terminal chart's lines. */
const MODE_DOMAIN = ['none', 'naive', 'spinlock', 'lock', 'full']
const MODE_RANGE = ['#d62728', '#e6a700', '#9467bd', '#1f77b4', '#2ca02c']

export async function renderSvgChart(scenario: ScenarioResult, subtitle: string): Promise<string> {
  const data = chartData(scenario, 100)
  // One point at the START of each bucket, drawn 'step-after' so a bucket is a flat
  // segment over its own time span (a 100 ms burst stays visible), plus a closing point.
  const values = data.series.flatMap((s) => [
    ...s.values.map((q, i) => ({ mode: s.mode, seconds: (i * data.bucketMs) / 1000, queriesPerSecond: q })),
    { mode: s.mode, seconds: data.durationMs / 1000, queriesPerSecond: s.values.at(-1) ?? 0 },
  ])
  // Symlog keeps 0 on the axis (a log scale cannot) while spacing 1, 10, 100… evenly;
  // explicit ticks because Vega's automatic symlog ticks skip the small values that matter.
  const max = Math.max(1, ...values.map((v) => v.queriesPerSecond))
  const ticks = [0, 1, 10, 100, 1_000, 10_000, 100_000].filter((t) => t <= max * 1.5)
  const spec: vegaLite.TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: scenario.title, subtitle, anchor: 'start' },
    width: 640,
    height: 280,
    background: 'white',
    data: { values },
    mark: { type: 'line', interpolate: 'step-after', strokeWidth: 2 },
    encoding: {
      x: {
        field: 'seconds',
        type: 'quantitative',
        title: `seconds since the traffic started (${data.bucketMs} ms buckets)`,
        scale: { domain: [0, data.durationMs / 1000] },
      },
      y: {
        field: 'queriesPerSecond',
        type: 'quantitative',
        title: `DB queries per second, averaged over ${data.bucketMs} ms buckets (symlog)`,
        scale: { type: 'symlog', constant: 1 },
        axis: { values: ticks, format: ',d' },
      },
      color: { field: 'mode', type: 'nominal', title: 'mode', scale: { domain: MODE_DOMAIN, range: MODE_RANGE } },
      // lock and full often draw the same line (1 query): full is dashed, drawn on top, so lock shows through.
      strokeDash: {
        field: 'mode',
        type: 'nominal',
        title: 'mode',
        scale: {
          domain: MODE_DOMAIN,
          range: [
            [1, 0],
            [1, 0],
            [1, 0],
            [6, 3],
          ],
        },
      },
    },
  }
  const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), { renderer: 'none' })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}
