/**
 * Runs load-test scenarios × modes and returns the results. No printing here: the CLI
 * (run.ts), the demo (demo.ts) and the test (test/load/) decide what to show.
 *
 *   1. Redis: REDIS_URL if given, else a private redis-server, else in-process mode.
 *   2. Database: the built-in slow source, or PostgreSQL (seeded) with DATABASE_URL.
 *   3. The app: W Express workers under node:cluster on one 127.0.0.1 port.
 *   4. For each scenario, for each mode: a fresh cache in every worker, a bounded
 *      autocannon run, the scenario's timeline (flaky DB, Redis outage), then collect.
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { startAppCluster, type AppCluster } from './app/cluster.js'
import type { QueryBins } from './app/protocol.js'
import { absoluteNow } from './db/query-counter.js'
import { seedPostgres } from './db/postgres-source.js'
import { describeSource, type SourceKind } from './db/source.js'
import { cacheOptionsFor, MODE_DESCRIPTIONS, NEEDS_REDIS, type ModeName } from './modes.js'
import { findRedisServer, startPrivateRedis, type PrivateRedis } from '../shared/redis-server.js'
import {
  binsFromStart,
  machineInfo,
  peakPerSecond,
  staleServedFrom,
  type LoadResults,
  type ModeResult,
  type ScenarioResult,
} from './results.js'
import { getScenario, type Scenario, type ScenarioName } from './scenarios.js'
import { runTraffic } from './traffic.js'
import { zipfSampler } from './zipf.js'
import { summarizePhases } from './report/phases.js'
import { warmUp, type WarmUpReport } from './warm-up.js'
import { redisUsage, usageBetween, type RedisUsage } from './redis-usage.js'

/** Scenarios whose runs time each miss's phases (load/stampede/app/miss-probe.ts): the many-keys one, or LOAD_PROBE=<list>. */
const PROBED_SCENARIOS: ReadonlySet<string> = new Set(process.env.LOAD_PROBE?.split(',') ?? ['zipf'])

export interface LoadOptions {
  scenarios: ScenarioName[]
  modes: ModeName[]
  workers: number
  dbLatencyMs: number
  /** Multiplies every scenario's run time (1 = as specified; tests use less). */
  timeScale: number
  /**
   * Runs the modes this many times over, interleaved (a, b, c, a, b, c…), one row each: on a
   * shared machine a neighbour's burst then hurts every mode alike, and no mode is always first.
   */
  repeat?: number
  /**
   * Unmeasured zipf traffic through every mode before the first measured run, until req/s
   * settles or this budget (ms) is spent (warm-up.ts). Default 0: none (the tests' short runs).
   */
  warmUpBudgetMs?: number
  /** Use this Redis (REDIS_URL). Undefined: start a private one if redis-server exists, else in-process mode. */
  redisUrl: string | undefined
  /** Never start a redis-server, even if one is installed (forces in-process mode without redisUrl). */
  noPrivateRedis?: boolean
  source: SourceKind
  /** Override the number of connections of every scenario (tests use fewer). */
  connections?: number
  events?: HarnessEvents
}

/** Hooks for whoever shows progress. All optional. */
export interface HarnessEvents {
  /** Once, after setup: the planned traffic time (for a progress bar) and what was set up. */
  onPlan?(plan: { totalMs: number; redis: string; database: string; workers: number; notes: string[] }): void
  /** After the warm-up, when there was one. */
  onWarmUp?(report: WarmUpReport, modes: readonly string[]): void
  onRunStart?(scenario: Scenario, mode: ModeName): void
  /** About 4× a second while traffic flows. */
  onTick?(tick: { scenario: ScenarioName; mode: ModeName; elapsedMs: number; dbQueries: number }): void
  onRunEnd?(scenario: Scenario, result: ModeResult): void
  onScenarioEnd?(result: ScenarioResult): void
}

interface RedisSetup {
  url: string | undefined
  label: string
  privateServer: PrivateRedis | undefined
}

async function setUpRedis(options: LoadOptions): Promise<RedisSetup> {
  if (options.redisUrl)
    return { url: options.redisUrl, label: `REDIS_URL (${redactUrl(options.redisUrl)})`, privateServer: undefined }
  const binary = options.noPrivateRedis ? undefined : findRedisServer()
  if (!binary)
    return {
      url: undefined,
      label: 'none: in-process mode (no REDIS_URL and no redis-server found)',
      privateServer: undefined,
    }
  const server = await startPrivateRedis()
  return {
    url: server.url,
    label: `private redis-server on ${server.url} (started by the harness)`,
    privateServer: server,
  }
}

function redactUrl(url: string): string {
  const u = new URL(url)
  if (u.password) u.password = '***'
  return u.toString()
}

export async function runLoad(options: LoadOptions): Promise<LoadResults> {
  const started = absoluteNow()
  const notes: string[] = []
  const events = options.events ?? {}
  const redis = await setUpRedis(options)
  let app: AppCluster | undefined
  const namespaces: string[] = []
  try {
    let modes = options.modes
    if (!redis.url) {
      const dropped = modes.filter((m) => NEEDS_REDIS.has(m))
      modes = modes.filter((m) => !NEEDS_REDIS.has(m))
      if (dropped.length)
        notes.push(
          `No Redis: skipped mode(s) ${dropped.join(', ')}; lock/full run in-process (one loader per miss per worker, not across workers).`,
        )
    }
    if (options.source.kind === 'postgres') await seedPostgres(options.source.url)
    app = await startAppCluster({ workers: options.workers, redisUrl: redis.url, source: options.source })

    const scenarios = options.scenarios.map((name) => getScenario(name, options.timeScale, options.connections))
    const runnable = (s: Scenario) => !s.needsPrivateRedis || redis.privateServer !== undefined
    for (const s of scenarios.filter((s) => !runnable(s))) {
      notes.push(
        `Skipped scenario ${s.name}: it stops and restarts Redis, which the harness only does to a redis-server it started itself (unset REDIS_URL).`,
      )
    }
    events.onPlan?.({
      totalMs: scenarios.filter(runnable).reduce((sum, s) => sum + s.durationMs * modes.length, 0),
      redis: redis.label,
      database: describeSource(options.source),
      workers: app.workers,
      notes,
    })

    const warmUpReport =
      (options.warmUpBudgetMs ?? 0) > 0
        ? await warmUpModes(app, modes, options, redis.url !== undefined, namespaces)
        : null
    if (warmUpReport) events.onWarmUp?.(warmUpReport, modes)

    // Live DB query counts of the current run, for onTick.
    let liveRunId = ''
    let liveQueries = 0
    app.onQueries((runId, bins: QueryBins) => {
      if (runId === liveRunId) for (const n of Object.values(bins)) liveQueries += n
    })

    const results: ScenarioResult[] = []
    for (const scenario of scenarios) {
      const base = {
        name: scenario.name,
        title: scenario.title,
        explain: scenario.explain,
        durationMs: scenario.durationMs,
        connections: scenario.connections,
      }
      if (!runnable(scenario)) {
        results.push({
          ...base,
          modes: [],
          skipped: notes.find((n) => n.includes(`scenario ${scenario.name}`)) ?? 'skipped',
        })
        continue
      }
      const modeResults: ModeResult[] = []
      const order = Array.from({ length: options.repeat ?? 1 }, (_, round) =>
        modes.map((_, i) => modes[(i + round) % modes.length]!),
      ).flat()
      for (const mode of order) {
        const runId = `${scenario.name}-${mode}-${randomBytes(4).toString('hex')}`
        const namespace = `sg-load:${runId}`
        namespaces.push(namespace)
        await app.configure({
          runId,
          mode,
          namespace,
          cache: cacheOptionsFor(mode, scenario.cache, redis.url !== undefined),
          dbLatencyMs: options.dbLatencyMs,
          probe: PROBED_SCENARIOS.has(scenario.name),
        })
        events.onRunStart?.(scenario, mode)
        liveRunId = runId
        liveQueries = 0

        const pathFor = pathSampler(scenario)
        const probed = PROBED_SCENARIOS.has(scenario.name) && redis.url !== undefined
        const usageBefore: RedisUsage | undefined = probed ? await redisUsage(redis.url!) : undefined
        const trafficStart = absoluteNow()
        const timeline = scheduleTimeline(scenario, app, redis.privateServer)
        const ticker = setInterval(() => {
          events.onTick?.({
            scenario: scenario.name,
            mode,
            elapsedMs: absoluteNow() - trafficStart,
            dbQueries: liveQueries,
          })
        }, 250)
        let traffic
        try {
          traffic = await runTraffic({
            url: app.url,
            connections: base.connections,
            durationMs: scenario.durationMs,
            pathFor,
          })
        } finally {
          clearInterval(ticker)
          await timeline.done
        }
        // Loads started in the last moments finish and are counted (they were counted at start anyway).
        await sleep(100)
        const collected = await app.collect(runId)
        const server = usageBefore ? usageBetween(usageBefore, await redisUsage(redis.url!)) : undefined
        const per100ms = binsFromStart(collected.bins, trafficStart, scenario.durationMs)
        const dbQueries = per100ms.reduce((a, b) => a + b, 0)
        const result: ModeResult = {
          mode,
          description: MODE_DESCRIPTIONS[mode],
          dbQueries,
          failedQueries: collected.failedQueries,
          peakQueriesPerSec: peakPerSecond(per100ms),
          queriesPer100ms: per100ms,
          reductionVsNone: null,
          traffic,
          staleServed: staleServedFrom(collected.stats),
          staleShare: traffic.requests > 0 ? staleServedFrom(collected.stats) / traffic.requests : 0,
          oldestServedMs: collected.oldestServedMs,
          cacheStats: collected.stats,
          ...(collected.probes.length > 0
            ? { phases: summarizePhases(collected.probes, options.dbLatencyMs + scenario.cache.ttlMs, server) }
            : {}),
        }
        modeResults.push(result)
        events.onRunEnd?.(scenario, result)
      }
      const none = modeResults.find((r) => r.mode === 'none')
      if (none) for (const r of modeResults) r.reductionVsNone = r.dbQueries > 0 ? none.dbQueries / r.dbQueries : null
      const scenarioResult: ScenarioResult = { ...base, modes: modeResults }
      results.push(scenarioResult)
      events.onScenarioEnd?.(scenarioResult)
    }

    return {
      startedAt: new Date(started).toISOString(),
      elapsedMs: absoluteNow() - started,
      machine: machineInfo(),
      settings: {
        workers: app.workers,
        dbLatencyMs: options.dbLatencyMs,
        timeScale: options.timeScale,
        redis: redis.label,
        database: describeSource(options.source),
        modes,
        warmUp: warmUpReport,
      },
      notes,
      scenarios: results,
    }
  } finally {
    await app?.stop()
    if (redis.privateServer) await redis.privateServer.stop()
    else if (redis.url) await deleteNamespaces(redis.url, namespaces)
  }
}

/** The request path for each request of a scenario. */
/** The warm-up before the measured runs (warm-up.ts), through `modes` on zipf traffic; its namespaces join `namespaces`. */
async function warmUpModes(
  app: AppCluster,
  modes: ModeName[],
  options: LoadOptions,
  withRedis: boolean,
  namespaces: string[],
): Promise<WarmUpReport> {
  const zipf = getScenario('zipf', 1, options.connections)
  return warmUp({
    app,
    modes,
    runFor(mode, runId) {
      const namespace = `sg-load:${runId}`
      namespaces.push(namespace)
      const cache = cacheOptionsFor(mode as ModeName, zipf.cache, withRedis)
      return { runId, mode, namespace, cache, dbLatencyMs: options.dbLatencyMs }
    },
    pathFor: pathSampler(zipf),
    connections: zipf.connections,
    budgetMs: options.warmUpBudgetMs,
  })
}

export function pathSampler(scenario: Scenario): () => string {
  const keys = scenario.keys
  if (keys.kind === 'single') {
    const path = `/item/${keys.id}`
    return () => path
  }
  const next = zipfSampler(keys.count, keys.exponent)
  return () => `/item/${next()}`
}

/** Starts the scenario's timed events; `done` settles when the last one has finished. */
export function scheduleTimeline(
  scenario: Scenario,
  app: AppCluster,
  privateRedis: PrivateRedis | undefined,
): { done: Promise<void> } {
  const pending = scenario.timeline.map(async (event) => {
    await sleep(event.atMs)
    if (event.action === 'db-failure-rate') app.setDbFailureRate(event.rate)
    else if (event.action === 'redis-outage' && privateRedis) await privateRedis.stopFor(event.forMs)
  })
  return { done: Promise.all(pending).then(() => undefined) }
}

/** On someone else's Redis (REDIS_URL) we leave nothing behind: delete our namespaces' keys. */
async function deleteNamespaces(url: string, namespaces: string[]): Promise<void> {
  const client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true })
  client.on('error', () => {})
  try {
    await client.connect()
    for (const ns of namespaces) {
      let cursor = '0'
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `${ns}:*`, 'COUNT', 500)
        cursor = next
        if (keys.length) await client.del(...keys)
      } while (cursor !== '0')
    }
  } catch {
    // Best effort: the keys all carry TTLs anyway.
  } finally {
    client.disconnect()
  }
}
