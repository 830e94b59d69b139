/** What `npm run compare --repeat N` prints (load/compare/tables.ts): pure, no processes. */
import { describe, expect, it } from 'vitest'
import type { MacroRow, MacroScenario } from '../../../load/compare/macro-results.js'
import { macroRoundTables, macroSummaryTable, macroTables } from '../../../load/compare/tables.js'

const row = (peer: string, dbQueries: number, reqPerSec: number, queriesVsOurs: number | null): MacroRow => ({
  peer,
  dbQueries,
  failedQueries: 0,
  peakQueriesPerSec: 0,
  queriesVsOurs,
  traffic: { reqPerSec, requests: reqPerSec, latencyMs: { p50: 1, p99: 10 } } as MacroRow['traffic'],
  errorsServed: 0,
  oldestServedMs: 0,
  staleServed: 0,
  staleShare: 0,
  workerCpuUsPerRequest: 100,
  redisCpuUsPerRequest: 10,
  redisCallsPerRequest: {},
})

// Two rounds; each peer's median (lower) round by req/s is a different round.
const round1 = [row('stampede-guard', 1000, 9000, 1), row('spin lock', 1500, 5000, 1.5)]
const round2 = [row('stampede-guard', 2000, 7000, 1), row('spin lock', 1000, 8000, 0.5)]
const scenario = (rounds: MacroRow[][], rows: MacroRow[]): MacroScenario => ({
  name: 'zipf',
  title: 'zipf',
  durationMs: 2000,
  connections: 100,
  ttlMs: 2000,
  staleMs: 10000,
  rows,
  rounds,
})

describe('compare: tables with --repeat', () => {
  it("says the main table's rows are median rounds and vs ours is against ours in that round", () => {
    const [table] = macroTables([scenario([round1, round2], [round2[0]!, round1[1]!])])
    expect(table!.title).toMatch(/median of 2 rounds by req\/s, vs ours against ours in that same round/)
    expect(macroTables([scenario([round1], round1)])[0]!.title).not.toMatch(/median/)
    expect(macroSummaryTable([scenario([round1, round2], [round2[0]!, round1[1]!])]).title).toMatch(
      /median of 2 rounds by req\/s, × ours in that same round/,
    )
    expect(macroSummaryTable([scenario([round1], round1)]).title).not.toMatch(/median/)
  })

  it("shows every round's DB queries against ours in the same round", () => {
    const [table] = macroRoundTables([scenario([round1, round2], [round2[0]!, round1[1]!])])
    const spin = table!.rows.find((r) => r[0] === 'spin lock')!
    expect(spin[4]).toBe('1.50 0.50')
    expect(spin[5]).toBe('1.80 0.88') // ours req/s ÷ this, round by round
  })
})
