/**
 * The per-scenario results table: one row per mode, numbers right-aligned so the eye can
 * run down a column and compare modes.
 */
import type { ScenarioResult } from '../results.js'
import { factor, int, ms } from '../../shared/format.js'
import { renderGrid } from '../../shared/grid.js'

interface Column {
  header: string
  cell: (r: ScenarioResult['modes'][number]) => string
  left?: boolean
}

const columns: Column[] = [
  { header: 'mode', cell: (r) => r.mode, left: true },
  {
    header: 'DB queries',
    cell: (r) => int(r.dbQueries) + (r.failedQueries ? ` (${int(r.failedQueries)} failed)` : ''),
  },
  { header: 'peak/s', cell: (r) => int(r.peakQueriesPerSec) },
  { header: 'vs none', cell: (r) => factor(r.reductionVsNone) },
  { header: 'req/s', cell: (r) => int(r.traffic.reqPerSec) },
  { header: 'p50 ms', cell: (r) => ms(r.traffic.latencyMs.p50) },
  { header: 'p99 ms', cell: (r) => ms(r.traffic.latencyMs.p99) },
  { header: 'max ms', cell: (r) => ms(r.traffic.latencyMs.max) },
  {
    header: 'non-2xx',
    cell: (r) => int(r.traffic.non2xx) + (r.traffic.errors ? ` +${int(r.traffic.errors)} err` : ''),
  },
  { header: 'stale served', cell: (r) => int(r.staleServed) },
  { header: 'stale %', cell: (r) => `${(100 * r.staleShare).toFixed(1)} %` },
  { header: 'oldest served', cell: (r) => `${(r.oldestServedMs / 1000).toFixed(2)} s` },
]

export function renderTable(scenario: ScenarioResult): string {
  return renderGrid(
    columns.map((c) => c.header),
    scenario.modes.map((r) => columns.map((c) => c.cell(r))),
    (i) => columns[i]!.left === true,
  )
}

/** The same table in Markdown, for pasting into the README. */
export function renderMarkdownTable(scenario: ScenarioResult): string {
  const header = `| ${columns.map((c) => c.header).join(' | ')} |`
  const align = `| ${columns.map((c) => (c.left ? ':--' : '--:')).join(' | ')} |`
  const rows = scenario.modes.map((r) => `| ${columns.map((c) => c.cell(r)).join(' | ')} |`)
  return [header, align, ...rows].join('\n')
}
