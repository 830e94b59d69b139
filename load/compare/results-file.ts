/**
 * Writes a comparison run under load/results/ (git-ignored): compare-<stamp>.json with
 * everything measured, and one SVG bar chart per benchmark that ran (Vega-Lite rendered
 * headlessly, as load/stampede/report/svg-chart.ts does).
 */
import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import * as vega from 'vega'
import * as vegaLite from 'vega-lite'
import { RESULTS_DIR, timestampForFile, type MachineInfo, type WarmUpReport } from './from-load.js'
import type { MacroScenario } from './macro-results.js'
import type { MicroResult } from './micro.js'
import type { LockResults } from './locks.js'

export interface CompareResults {
  startedAt: string
  elapsedMs: number
  command: string
  machine: MachineInfo & { loadAverageAtStart: number }
  versions: Record<string, string>
  configurations: { caches: Record<string, string>; locks: Record<string, string> }
  quick: boolean
  macro: MacroScenario[] | undefined
  /** The macro benchmark's unmeasured warm-up (load/stampede/warm-up.ts), when it ran. */
  macroWarmUp?: WarmUpReport
  micro: MicroResult | undefined
  locks: LockResults | undefined
}

type Bar = { group: string; name: string; value: number }

export async function writeCompareResults(results: CompareResults, dir = RESULTS_DIR): Promise<string[]> {
  await mkdir(dir, { recursive: true })
  const stamp = `compare-${timestampForFile(results.startedAt)}`
  const json = path.join(dir, `${stamp}.json`)
  await writeFile(json, JSON.stringify(results, null, 2) + '\n')
  const files = [json]
  const subtitle = `${results.machine.cpus} × ${results.machine.cpuModel}, load ${results.machine.loadAverageAtStart.toFixed(1)}, ${results.startedAt.slice(0, 16)} UTC`
  const charts: [name: string, title: string, axis: string, bars: Bar[]][] = []
  if (results.macro)
    charts.push([
      'macro',
      'Stampede macro-benchmark: DB queries per scenario (fewer is better)',
      'DB queries (log)',
      results.macro.flatMap((s) =>
        s.rows.map((r) => ({ group: s.name, name: r.peer, value: Math.max(1, r.dbQueries) })),
      ),
    ])
  if (results.micro)
    charts.push([
      'micro',
      'Hit path: µs per call (shorter is better)',
      'µs per call (log)',
      results.micro.rows.flatMap((r) =>
        (
          [
            ['L1 hit', r.l1HitNs],
            ['L2 hit c1', r.l2HitNs?.c1],
            ['L2 hit c64', r.l2HitNs?.c64],
            ['cold miss', r.coldMissNs],
          ] as const
        ).flatMap(([group, ns]) => (ns === undefined ? [] : [{ group, name: r.peer, value: ns / 1000 }])),
      ),
    ])
  if (results.locks)
    charts.push([
      'locks',
      'Locks: hand-off p50 with 4 processes, and coupons issued/s',
      'ms (hand-off) / issued per s (coupons), log',
      [
        ...results.locks.rows.map((r) => ({ group: 'hand-off p50 ms', name: r.lock, value: r.handoffP50Ms })),
        ...results.locks.coupons.map((r) => ({
          group: 'coupons issued/s',
          name: r.contender,
          value: r.issuedPerSecond,
        })),
      ],
    ])
  for (const [name, title, axis, bars] of charts) {
    const file = path.join(dir, `${stamp}-${name}.svg`)
    await writeFile(file, await barChart(title, subtitle, axis, bars))
    files.push(file)
  }
  return files
}

/** One horizontal bar per peer, grouped in rows (scenario, path, measurement), log x axis. */
async function barChart(title: string, subtitle: string, axis: string, values: Bar[]): Promise<string> {
  const spec: vegaLite.TopLevelSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, subtitle, anchor: 'start' },
    background: 'white',
    data: { values: values.filter((v) => Number.isFinite(v.value) && v.value > 0) },
    facet: { row: { field: 'group', type: 'nominal', title: null, sort: null } },
    resolve: { scale: { x: 'independent' } },
    spec: {
      width: 520,
      mark: { type: 'bar' },
      encoding: {
        y: { field: 'name', type: 'nominal', title: null, sort: null },
        x: { field: 'value', type: 'quantitative', title: axis, scale: { type: 'log' } },
        color: { field: 'name', type: 'nominal', legend: null },
        tooltip: [{ field: 'value', type: 'quantitative', format: ',.2f' }],
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
