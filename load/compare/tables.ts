/**
 * The comparison's tables, as terminal grids and as Markdown (for the README), from the
 * same rows: one `Table` per benchmark section.
 */
import { factor, int, ms, renderGrid } from './from-load.js'
import { OURS, type MacroRow, type MacroScenario } from './macro-results.js'
import type { MicroResult } from './micro.js'
import type { LockResults } from './locks.js'

export interface Table {
  title: string
  headers: string[]
  rows: string[][]
}

export function renderTerminal(table: Table): string {
  return `${table.title}\n${renderGrid(table.headers, table.rows)}`
}

export function renderMarkdown(table: Table): string {
  return [
    `**${table.title}**`,
    '',
    `| ${table.headers.join(' | ')} |`,
    `| ${table.headers.map((_, i) => (i === 0 ? ':--' : '--:')).join(' | ')} |`,
    ...table.rows.map((row) => `| ${row.join(' | ')} |`),
  ].join('\n')
}

const seconds = (n: number) => `${(n / 1000).toFixed(2)} s`
const percent = (share: number) => `${(100 * share).toFixed(1)} %`

export function macroTables(scenarios: MacroScenario[]): Table[] {
  return scenarios.map((s) => ({
    title:
      `${s.title} (${s.connections} connections, ${(s.durationMs / 1000).toFixed(1)} s per peer, ttl ${s.ttlMs / 1000} s + ${s.staleMs / 1000} s stale)` +
      // With rounds, the rows come from different rounds: say so, or a reader divides two rows
      // and gets another "vs ours" than the one shown (which is against ours in that peer's round).
      (s.rounds.length > 1
        ? `; each peer's median of ${s.rounds.length} rounds by req/s, vs ours against ours in that same round`
        : ''),
    headers: [
      'cache',
      'DB queries',
      'vs ours',
      'p50 ms',
      'p99 ms',
      'req/s',
      'app CPU µs/req',
      'errors served',
      'oldest served',
      'stale',
    ],
    rows: s.rows.map((r) => [
      r.peer,
      int(r.dbQueries) + (r.failedQueries ? ` (${int(r.failedQueries)} failed)` : ''),
      factor(r.queriesVsOurs),
      ms(r.traffic.latencyMs.p50),
      ms(r.traffic.latencyMs.p99),
      int(r.traffic.reqPerSec),
      r.workerCpuUsPerRequest.toFixed(0),
      int(r.errorsServed),
      seconds(r.oldestServedMs),
      percent(r.staleShare),
    ]),
  }))
}

/**
 * A scenario run with `--repeat N`: per peer, each round's req/s and p99 beside ours in the
 * same round. Rounds are adjacent in time, so a ratio within one round is what a shared,
 * noisy machine still measures fairly; the main table shows each peer's median round.
 */
export function macroRoundTables(scenarios: MacroScenario[]): Table[] {
  return scenarios
    .filter((s) => s.rounds.length > 1)
    .map((s) => {
      const ratios = (peer: string, of: (r: MacroRow) => number) =>
        s.rounds
          .map((round) => {
            const ours = round.find((r) => r.peer === OURS)
            const theirs = round.find((r) => r.peer === peer)!
            return ours ? (of(ours) / of(theirs)).toFixed(2) : '—'
          })
          .join(' ')
      return {
        title: `${s.name}, ${s.rounds.length} rounds, each starting one peer later: ours ÷ this peer in the same round`,
        headers: [
          'cache',
          'req/s per round',
          'p99 ms per round',
          'app CPU µs/req per round',
          'DB queries ÷ ours (this ÷ ours)',
          'ours req/s ÷ this',
          'ours p99 ÷ this',
        ],
        rows: s.rows.map(({ peer }) => [
          peer,
          s.rounds.map((round) => int(round.find((r) => r.peer === peer)!.traffic.reqPerSec)).join(' '),
          s.rounds.map((round) => ms(round.find((r) => r.peer === peer)!.traffic.latencyMs.p99)).join(' '),
          s.rounds.map((round) => round.find((r) => r.peer === peer)!.workerCpuUsPerRequest.toFixed(0)).join(' '),
          s.rounds
            .map((round) => {
              const vs = round.find((r) => r.peer === peer)!.queriesVsOurs
              return vs === null ? '—' : vs.toFixed(2)
            })
            .join(' '),
          ratios(peer, (r) => r.traffic.reqPerSec),
          ratios(peer, (r) => r.traffic.latencyMs.p99),
        ]),
      }
    })
}

/** ns → "123 ns" / "12.3 µs". */
const nanos = (ns: number) => (ns < 1_000 ? `${Math.round(ns)} ns` : `${(ns / 1_000).toFixed(ns < 10_000 ? 2 : 1)} µs`)
const orDash = <T>(value: T | undefined, format: (v: T) => string) => (value === undefined ? '—' : format(value))

export function microTable(micro: MicroResult): Table {
  return {
    title: `hit path: time per call (mitata, median of samples), and Redis CPU per call from INFO commandstats`,
    headers: [
      'cache',
      'L1 hit',
      'L2 hit c1',
      'L2 hit c64 (per call)',
      'cold miss c1',
      'Redis µs per L2 hit c1 / c64',
      'Redis commands per L2 hit',
    ],
    rows: micro.rows.map((r) => [
      r.peer,
      orDash(r.l1HitNs, nanos),
      orDash(r.l2HitNs?.c1, nanos),
      orDash(r.l2HitNs?.c64, nanos),
      orDash(r.coldMissNs, nanos),
      r.redisUsecPerHit === undefined ? '—' : `${r.redisUsecPerHit.toFixed(2)} / ${r.redisUsecPerHitC64!.toFixed(2)}`,
      r.redisCommandsPerHit ?? '—',
    ]),
  }
}

export function lockTables(locks: LockResults): Table[] {
  const tables: Table[] = [
    {
      title: `locks: uncontended acquire/release, and hand-off (release → next holder) with ${locks.processes} processes contending for one key`,
      headers: [
        'lock',
        'acquire p50 ms',
        'release p50 ms',
        'hand-off p50 ms',
        'hand-off p99 ms',
        'holds/s (4 processes)',
        'two holders at once',
      ],
      rows: locks.rows.map((r) => [
        r.lock,
        r.acquireP50Ms.toFixed(2),
        r.releaseP50Ms.toFixed(2),
        r.handoffP50Ms.toFixed(2),
        r.handoffP99Ms.toFixed(2),
        int(r.holdsPerSecond),
        int(r.overlaps),
      ]),
    },
  ]
  if (locks.coupons.length > 0)
    tables.push({
      title: `coupons: ${locks.couponCount} coupons, ${locks.couponUsers} users, 4 processes × 4 issues in flight, one PostgreSQL row`,
      headers: ['lock', 'issued', 'oversold', 'issued/s', 'p50 ms', 'p99 ms', 'gave up/errors'],
      rows: locks.coupons.map((r) => [
        r.contender,
        int(r.issued),
        int(r.oversold),
        int(r.issuedPerSecond),
        r.p50Ms.toFixed(1),
        r.p99Ms.toFixed(1),
        int(r.gaveUp + r.errors.length),
      ]),
    })
  return tables
}

/**
 * One row per cache over every scenario, for the README: DB queries (× ours) per scenario,
 * errors served in flaky, and the zipf latency and throughput.
 */
export function macroSummaryTable(scenarios: MacroScenario[]): Table {
  const peers = scenarios[0]?.rows.map((r) => r.peer) ?? []
  const row = (s: MacroScenario, peer: string) => s.rows.find((r) => r.peer === peer)
  const zipf = scenarios.find((s) => s.name === 'zipf')
  const flaky = scenarios.find((s) => s.name === 'flaky')
  const rounds = scenarios[0]?.rounds.length ?? 1
  return {
    title:
      'stampede macro-benchmark: DB queries (× ours) per scenario, errors served, zipf latency' +
      (rounds > 1 ? `; each peer's median of ${rounds} rounds by req/s, × ours in that same round` : ''),
    headers: [
      'cache',
      ...scenarios.map((s) => `${s.name} queries`),
      ...(flaky ? ['flaky errors served'] : []),
      ...(zipf ? ['zipf p50 / p99 ms', 'zipf req/s'] : []),
    ],
    rows: peers.map((peer) => [
      peer,
      ...scenarios.map((s) => {
        const r = row(s, peer)
        return r ? `${int(r.dbQueries)} (${factor(r.queriesVsOurs)})` : '—'
      }),
      ...(flaky ? [int(row(flaky, peer)?.errorsServed ?? NaN)] : []),
      ...(zipf
        ? [
            `${ms(row(zipf, peer)?.traffic.latencyMs.p50 ?? NaN)} / ${ms(row(zipf, peer)?.traffic.latencyMs.p99 ?? NaN)}`,
            int(row(zipf, peer)?.traffic.reqPerSec ?? NaN),
          ]
        : []),
    ]),
  }
}

/** One row per lock, for the README: latency, hand-off, throughput and coupons together. */
export function lockSummaryTable(locks: LockResults): Table {
  return {
    title: `locks: uncontended latency, hand-off with ${locks.processes} processes, coupons issued/s (${locks.couponCount} coupons)`,
    headers: ['lock', 'acquire + release p50 ms', 'hand-off p50 / p99 ms', 'holds/s', 'coupons issued/s', 'oversold'],
    rows: locks.rows.map((r) => {
      const coupon = locks.coupons.find((c) => c.contender === r.lock)
      return [
        r.lock,
        (r.acquireP50Ms + r.releaseP50Ms).toFixed(2),
        `${r.handoffP50Ms.toFixed(1)} / ${r.handoffP99Ms.toFixed(0)}`,
        int(r.holdsPerSecond),
        coupon ? int(coupon.issuedPerSecond) : '—',
        coupon ? int(coupon.oversold) : '—',
      ]
    }),
  }
}
