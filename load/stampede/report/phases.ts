/**
 * The probed runs' per-phase timings (load/stampede/app/miss-probe.ts), merged over the
 * workers: where a miss spends its time, how many Redis commands each request and each load
 * costs, and how many loads an ideal single-flight would have needed.
 */
import type { ProbeReport } from '../app/protocol.js'
import { renderGrid } from '../../shared/grid.js'
import type { ScenarioResult } from '../results.js'
import type { PhaseSummary, PhaseTiming } from './phase-summary.js'
import type { RedisUsage } from '../redis-usage.js'

/** A wait's value comes from a commit at most this long before it ended (else it came from elsewhere: a re-check's fresh read). */
const WAKE_MATCH_MS = 1_000

/** Phases in the order a miss goes through them; round trips after. */
const ORDER = [
  'miss → first command',
  'miss → loader start',
  'loader',
  'loader end → commit sent',
  'waiter wake-up (commit answered → waiter answered)',
]

export function summarizePhases(probes: ProbeReport[], windowMs: number, server?: RedisUsage): PhaseSummary {
  const samples = new Map<string, number[]>()
  const commands: Record<string, number> = {}
  const arrivals = new Map<string, number[]>()
  const commits = new Map<string, number[]>()
  const wakes: [string, number][] = []
  let requests = 0
  let flights = 0
  let flightsWithoutRedis = 0
  for (const p of probes) {
    requests += p.requests
    flights += p.flights
    flightsWithoutRedis += p.flightsWithoutRedis
    for (const [phase, values] of Object.entries(p.samples)) append(samples, phase, values)
    for (const [kind, n] of Object.entries(p.commands)) commands[kind] = (commands[kind] ?? 0) + n
    for (const [item, times] of Object.entries(p.arrivals)) append(arrivals, item, times)
    for (const [item, times] of Object.entries(p.commits)) append(commits, item, times)
    wakes.push(...p.wakes)
  }
  let idealLoads = 0
  for (const times of arrivals.values()) {
    times.sort((a, b) => a - b)
    let coveredUntil = -Infinity
    for (const t of times) {
      if (t < coveredUntil) continue
      idealLoads++
      coveredUntil = t + windowMs
    }
  }
  for (const times of commits.values()) times.sort((a, b) => a - b)
  const wakeUps: number[] = []
  let unmatchedWakes = 0
  for (const [item, at] of wakes) {
    const committed = latestAtOrBefore(commits.get(item) ?? [], at)
    if (committed === undefined || at - committed > WAKE_MATCH_MS) unmatchedWakes++
    else wakeUps.push(Math.round((at - committed) * 100) / 100)
  }
  if (wakeUps.length > 0) samples.set(ORDER[4]!, wakeUps)
  const rank = (phase: string) => (ORDER.includes(phase) ? ORDER.indexOf(phase) : ORDER.length)
  const phases = [...samples.entries()]
    .sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b))
    .map(([phase, values]) => timing(phase, values))
  const commandsPerRequest = Object.fromEntries(
    Object.entries(commands)
      .sort(([, a], [, b]) => b - a)
      .map(([kind, n]) => [kind, requests > 0 ? n / requests : 0]),
  )
  return {
    requests,
    flights,
    flightsWithoutRedis,
    idealLoads,
    phases,
    commandsPerRequest,
    unmatchedWakes,
    workerCpuMs: probes.reduce((sum, p) => sum + p.cpuMs, 0),
    loopDelays: probes.map((p) => `${p.loopDelay.p50}/${p.loopDelay.p99}/${p.loopDelay.max}`),
    ...(server ? { server } : {}),
  }
}

/** One block per probed mode: loads vs ideal, commands per request and per load, the phase percentiles. */
export function renderPhases(scenario: ScenarioResult): string {
  const lines: string[] = []
  const shown = new Set<string>()
  for (const mode of scenario.modes) {
    const s = mode.phases
    if (!s || shown.has(mode.mode)) continue // repeated rounds: the first round's phases
    shown.add(mode.mode)
    const ideal = s.idealLoads > 0 ? (mode.dbQueries / s.idealLoads).toFixed(2) : '—'
    const perLoad = (n: number) => (mode.dbQueries > 0 ? ((n * s.requests) / mode.dbQueries).toFixed(2) : '—')
    lines.push(
      `${mode.mode}: loads ${mode.dbQueries.toLocaleString('en-US')} / ideal ${s.idealLoads.toLocaleString('en-US')} = ${ideal}×; ` +
        `${s.requests.toLocaleString('en-US')} requests, ${s.flights.toLocaleString('en-US')} flights ` +
        `(${s.flightsWithoutRedis.toLocaleString('en-US')} without Redis); ${s.unmatchedWakes} wakes with no commit answered in the 1 s before (a re-check that saw the value first)`,
    )
    lines.push(
      '  commands per request (per load): ' +
        Object.entries(s.commandsPerRequest)
          .map(([kind, n]) => `${kind} ${n.toFixed(3)} (${perLoad(n)})`)
          .join(', '),
    )
    const cpuPerRequest = s.requests > 0 ? (s.workerCpuMs * 1000) / s.requests : 0
    lines.push(
      `  workers: ${s.workerCpuMs.toFixed(0)} ms CPU (${cpuPerRequest.toFixed(0)} µs per request); ` +
        `event-loop delay per worker, p50/p99/max ms: ${s.loopDelays.join(', ')}`,
    )
    if (s.server) {
      const perRequest = s.requests > 0 ? (s.server.cpuMs * 1000) / s.requests : 0
      const top = Object.entries(s.server.commands)
        .sort(([, a], [, b]) => b.usec - a.usec)
        .slice(0, 6)
        .map(([name, c]) => `${name} ${c.calls.toLocaleString('en-US')} × ${(c.usec / c.calls).toFixed(1)} µs`)
      lines.push(
        `  redis-server: ${s.server.cpuMs.toFixed(0)} ms CPU (${perRequest.toFixed(1)} µs per request); ${top.join(', ')}`,
      )
    }
    const rows = s.phases.map((p) => [
      `  ${p.phase}`,
      p.samples.toLocaleString('en-US'),
      ms(p.p50),
      ms(p.p90),
      ms(p.p99),
      ms(p.max),
    ])
    lines.push(renderGrid(['  phase (ms)', 'samples', 'p50', 'p90', 'p99', 'max'], rows))
  }
  return lines.join('\n')
}

const ms = (v: number) => (v >= 10 ? v.toFixed(0) : v.toFixed(2))

function append(map: Map<string, number[]>, key: string, values: number[]): void {
  const into = map.get(key)
  if (into) for (const v of values) into.push(v)
  else map.set(key, [...values])
}

function latestAtOrBefore(sorted: number[], at: number): number | undefined {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (sorted[mid]! <= at) lo = mid + 1
    else hi = mid
  }
  return lo > 0 ? sorted[lo - 1] : undefined
}

function timing(phase: string, values: number[]): PhaseTiming {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
  return { phase, samples: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted.at(-1) ?? 0 }
}
