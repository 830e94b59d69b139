/**
 * Benchmark 1, the stampede macro-benchmark: the load/ scenarios (cold, expiry, zipf, flaky)
 * with every cache peer as a mode, behind the same W-worker Express app and the same slow
 * database (load/stampede/app/, with app-loader.ts as its item loader). Per scenario and peer: DB
 * queries and their ratio to ours, p50/p99 and req/s, errors served, the oldest age served
 * and the stale share.
 */
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  absoluteNow,
  binsFromStart,
  getScenario,
  pathSampler,
  peakPerSecond,
  runTraffic,
  scheduleTimeline,
  startAppCluster,
  type AppCluster,
  redisUsage,
  usageBetween,
  warmUp,
  type WarmUpReport,
  type ScenarioName,
  type TrafficResult,
} from './from-load.js'
import { cachePeer } from './caches.js'
import { lowerMedianBy } from './arithmetic.js'
import { OURS, type MacroRow, type MacroScenario } from './macro-results.js'

export { OURS, type MacroRow, type MacroScenario }

export const MACRO_SCENARIOS: ScenarioName[] = ['cold', 'expiry', 'zipf', 'flaky']

export interface MacroOptions {
  redisUrl: string
  peers: string[]
  scenarios: ScenarioName[]
  workers: number
  dbLatencyMs: number
  timeScale: number
  /** Rounds per scenario, each starting one peer later (default 1). */
  repeat?: number
  /** Unmeasured zipf traffic through every peer first, until req/s settles or this budget (ms) is spent. */
  warmUpBudgetMs: number
  onWarmUp?(report: WarmUpReport): void
  onRun?(scenario: ScenarioName, peer: string, result: MacroRow): void
}

export async function runMacro(options: MacroOptions): Promise<MacroScenario[]> {
  const app = await startAppCluster({
    workers: options.workers,
    redisUrl: options.redisUrl,
    source: { kind: 'builtin' },
    itemLoaderModule: fileURLToPath(new URL('./app-loader.ts', import.meta.url)),
    // Every worker imports every peer before it listens: slow on a busy machine.
    startTimeoutMs: 120_000,
  })
  const results: MacroScenario[] = []
  try {
    const report = await warmUp({
      app,
      modes: options.peers,
      runFor: (peer, runId) => ({
        runId,
        mode: peer,
        namespace: `sg-compare:${runId}`,
        cache: { ttl: 2_000, staleTtl: 10_000, staleIfError: 10_000, earlyRefresh: false, l1: true },
        dbLatencyMs: options.dbLatencyMs,
      }),
      pathFor: pathSampler(getScenario('zipf')),
      connections: getScenario('zipf').connections,
      budgetMs: options.warmUpBudgetMs,
    })
    options.onWarmUp?.(report)
    for (const [index, name] of options.scenarios.entries()) {
      const scenario = getScenario(name, options.timeScale)
      const { ttlMs, staleTtlMs: staleMs } = scenario.cache
      const rounds: MacroRow[][] = []
      for (let round = 0; round < (options.repeat ?? 1); round++) {
        // Each scenario and round starts with the next peer: no peer always runs first (cold JIT) or last.
        const shift = index + round
        const order = options.peers.map((_, i) => options.peers[(i + shift) % options.peers.length]!)
        const rows: MacroRow[] = []
        for (const peer of order) {
          const row = await runPeer(app, options, name, peer)
          rows.push(row)
          options.onRun?.(name, peer, row)
        }
        rows.sort((a, b) => options.peers.indexOf(a.peer) - options.peers.indexOf(b.peer))
        rounds.push(rows)
      }
      const rows = options.peers.map((peer) =>
        lowerMedianBy(
          rounds.map((r) => r.find((row) => row.peer === peer)!),
          (row) => row.traffic.reqPerSec,
        ),
      )
      for (const r of rounds.flat()) {
        const oursThen = rounds.find((round) => round.includes(r))!.find((row) => row.peer === OURS)
        r.queriesVsOurs = oursThen && oursThen.dbQueries > 0 ? r.dbQueries / oursThen.dbQueries : null
      }
      results.push({
        name,
        title: scenario.title,
        durationMs: scenario.durationMs,
        connections: scenario.connections,
        ttlMs,
        staleMs,
        rows,
        rounds,
      })
    }
  } finally {
    await app.stop()
  }
  return results
}

/** One measured run of one peer in one scenario. */
async function runPeer(app: AppCluster, options: MacroOptions, name: ScenarioName, peer: string): Promise<MacroRow> {
  const scenario = getScenario(name, options.timeScale)
  const { ttlMs, staleTtlMs: staleMs } = scenario.cache
  cachePeer(peer) // an unknown name fails here, before any traffic
  const runId = `${name}-${peer.replace(/\W+/g, '-')}-${randomBytes(4).toString('hex')}`
  await app.configure({
    runId,
    mode: peer,
    namespace: `sg-compare:${runId}`,
    cache: { ttl: ttlMs, staleTtl: staleMs, staleIfError: staleMs, earlyRefresh: false, l1: true },
    dbLatencyMs: options.dbLatencyMs,
  })
  const usageBefore = await redisUsage(options.redisUrl)
  const trafficStart = absoluteNow()
  const timeline = scheduleTimeline(scenario, app, undefined)
  let traffic: TrafficResult
  try {
    traffic = await runTraffic({
      url: app.url,
      connections: scenario.connections,
      durationMs: scenario.durationMs,
      pathFor: pathSampler(scenario),
    })
  } finally {
    await timeline.done
  }
  await sleep(100) // loads started in the last moments are counted
  const collected = await app.collect(runId)
  const server = usageBetween(usageBefore, await redisUsage(options.redisUrl))
  const perRequest = (n: number) => (traffic.requests > 0 ? n / traffic.requests : 0)
  const per100ms = binsFromStart(collected.bins, trafficStart, scenario.durationMs)
  const staleServed = collected.stats.stale ?? 0
  return {
    peer,
    dbQueries: per100ms.reduce((a, b) => a + b, 0),
    failedQueries: collected.failedQueries,
    peakQueriesPerSec: peakPerSecond(per100ms),
    queriesVsOurs: null,
    traffic,
    errorsServed: traffic.non2xx + traffic.errors,
    oldestServedMs: collected.oldestServedMs,
    staleServed,
    staleShare: traffic.requests > 0 ? staleServed / traffic.requests : 0,
    workerCpuUsPerRequest: perRequest(collected.cpuMs * 1000),
    redisCpuUsPerRequest: perRequest(server.cpuMs * 1000),
    redisCallsPerRequest: Object.fromEntries(
      Object.entries(server.commands).map(([name, { calls }]) => [name, perRequest(calls)]),
    ),
  }
}
