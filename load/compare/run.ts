/**
 * `npm run compare -- [options]`: stampede-guard side by side with the caches and locks
 * users would pick instead, in one run on one machine (ratios hold on a noisy machine;
 * absolute figures do not). Prints the tables; writes load/results/compare-<stamp>.json
 * and one SVG chart per benchmark.
 */
import { loadavg } from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import {
  bold,
  describeSource,
  describeWarmUp,
  dim,
  findRedisServer,
  machineInfo,
  startPrivateRedis,
  type ScenarioName,
  type WarmUpReport,
} from './from-load.js'
import { CACHE_PEER_NAMES, CACHE_PEERS } from './caches.js'
import { LOCK_PEERS } from './lock-peers.js'
import { MACRO_SCENARIOS, runMacro, type MacroScenario } from './macro.js'
import { runMicro, type MicroResult } from './micro.js'
import { runLocks, type LockResults } from './locks.js'
import {
  lockSummaryTable,
  lockTables,
  macroSummaryTable,
  macroRoundTables,
  macroTables,
  microTable,
  renderMarkdown,
  renderTerminal,
  type Table,
} from './tables.js'
import { peerVersions, serverVersions } from './versions.js'
import { writeCompareResults } from './results-file.js'

const BENCHES = ['macro', 'micro', 'locks'] as const
type Bench = (typeof BENCHES)[number]

const USAGE = `Usage: npm run compare -- [options]

  --bench LIST       comma-separated: ${BENCHES.join(', ')} (default: all three, about 6 minutes)
  --quick            short runs of everything (about 2 minutes): to check the harness, not to publish
  --time-scale N     the macro runs' length as a share of the load/ scenarios' (default 0.4, --quick 0.25;
                     1 = zipf's full 8 s per peer, steadier req/s on a small machine)
  --repeat N         run each macro scenario N times, each round starting one peer later; the table shows
                     each peer's median round, and a second table every round's ratio to ours (default: 1)
  --caches LIST      cache peers (default: ${CACHE_PEER_NAMES.join(', ')})
  --scenarios LIST   macro scenarios (default: ${MACRO_SCENARIOS.join(', ')})
  --locks LIST       lock peers (default: ${LOCK_PEERS.map((p) => p.name).join(', ')})
  --markdown         also print every table as Markdown (for the README)
  --no-files         do not write load/results/compare-<stamp>.{json,svg}
  -h, --help         this text

Environment: DATABASE_URL (PostgreSQL for the locks; default postgres://postgres@127.0.0.1:5432/test).
Redis: a private redis-server on a free loopback port, started and stopped by this run.`

/** "get 1.02, evalsha 0.09, …": the five commands most called per request. */
function topCalls(calls: Record<string, number>): string {
  const top = Object.entries(calls)
    .filter(([name]) => !/^(info|config|client|hello)/.test(name))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 5)
  return top.map(([name, n]) => `${name} ${n.toFixed(3)}`).join(', ') || 'none'
}

function list(raw: string | undefined, valid: readonly string[], what: string): string[] | undefined {
  if (raw === undefined) return undefined
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  for (const item of items)
    if (!valid.includes(item)) throw new Error(`unknown ${what} '${item}' (expected one of: ${valid.join(', ')})`)
  if (items.length === 0) throw new Error(`--${what}: empty list`)
  return items
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      bench: { type: 'string' },
      quick: { type: 'boolean', default: false },
      'time-scale': { type: 'string' },
      repeat: { type: 'string' },
      caches: { type: 'string' },
      scenarios: { type: 'string' },
      locks: { type: 'string' },
      markdown: { type: 'boolean', default: false },
      'no-files': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  })
  if (values.help) return console.log(USAGE)
  const benches = (list(values.bench, BENCHES, 'bench') ?? [...BENCHES]) as Bench[]
  const caches = list(values.caches, CACHE_PEER_NAMES, 'caches') ?? CACHE_PEER_NAMES
  const scenarios = (list(values.scenarios, MACRO_SCENARIOS, 'scenarios') ?? MACRO_SCENARIOS) as ScenarioName[]
  const locks =
    list(
      values.locks,
      LOCK_PEERS.map((p) => p.name),
      'locks',
    ) ?? LOCK_PEERS.map((p) => p.name)
  const quick = values.quick
  const timeScale = values['time-scale'] === undefined ? (quick ? 0.25 : 0.4) : Number(values['time-scale'])
  if (!(timeScale > 0 && timeScale <= 4))
    throw new Error(`--time-scale: expected a number in (0, 4], got ${values['time-scale']}`)
  const repeat = values.repeat === undefined ? 1 : Number(values.repeat)
  if (!(Number.isInteger(repeat) && repeat >= 1 && repeat <= 20))
    throw new Error(`--repeat: expected a whole number from 1 to 20, got ${values.repeat}`)
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

  const startedAt = new Date()
  const machine = machineInfo()
  const load = loadavg()[0]!
  const versions = await peerVersions([...CACHE_PEERS, ...LOCK_PEERS].map((p) => p.package))
  console.log(bold('stampede-guard compared'))
  console.log(
    `  machine:  ${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, load average ${load.toFixed(1)}`,
  )
  console.log(
    `  peers:    ${Object.entries(versions)
      .map(([name, version]) => `${name} ${version}`)
      .join(', ')}`,
  )
  console.log(dim(`  ${quick ? 'quick mode: short runs, not for publishing' : 'full run'}`))

  if (!findRedisServer()) throw new Error('npm run compare needs redis-server on PATH (or REDIS_SERVER_BIN)')
  const redis = await startPrivateRedis()
  Object.assign(versions, await serverVersions(redis.url, databaseUrl))
  console.log(`  redis:    private redis-server ${versions['redis-server']} on ${redis.url} (started by this run)`)
  console.log(`  postgres: ${versions.postgresql} at ${describeSource({ kind: 'postgres', url: databaseUrl })}\n`)
  const tables: Table[] = []
  const show = (more: Table[]) => {
    for (const table of more) console.log(`${renderTerminal(table)}\n`)
    tables.push(...more)
  }
  let macro: MacroScenario[] | undefined
  let macroWarmUp: WarmUpReport | undefined
  let micro: MicroResult | undefined
  let lockResults: LockResults | undefined
  try {
    if (benches.includes('macro')) {
      console.log(bold('■ 1. stampede macro-benchmark: 4 Express workers, the built-in slow database (50 ms a query)'))
      macro = await runMacro({
        redisUrl: redis.url,
        peers: caches,
        scenarios,
        workers: 4,
        dbLatencyMs: 50,
        timeScale,
        repeat,
        // --quick: one pass, to check the harness; a full run warms until req/s settles.
        warmUpBudgetMs: quick ? 2_000 * caches.length : 40_000,
        onWarmUp: (report) => {
          macroWarmUp = report
          console.log(dim(`  ${describeWarmUp(report, caches)}`))
        },
        onRun: (scenario, peer, row) =>
          console.log(
            dim(
              `  ${scenario} · ${peer}: ${row.dbQueries} DB queries, ${Math.round(row.traffic.reqPerSec)} req/s; ` +
                `app CPU ${row.workerCpuUsPerRequest.toFixed(0)} µs/req, Redis CPU ${row.redisCpuUsPerRequest.toFixed(1)} µs/req; ` +
                `Redis calls/req ${topCalls(row.redisCallsPerRequest)}`,
            ),
          ),
      })
      show([...macroTables(macro), ...macroRoundTables(macro)])
    }
    if (benches.includes('micro')) {
      console.log(bold('■ 2. hit-path micro-benchmark (mitata), this process, one Redis'))
      micro = await runMicro({ redisUrl: redis.url, peers: caches, sampleMs: quick ? 40 : 100, rounds: quick ? 2 : 3 })
      show([microTable(micro)])
    }
    if (benches.includes('locks')) {
      console.log(
        bold(
          `■ 3. locks: latency, 4-process hand-off, coupons (${describeSource({ kind: 'postgres', url: databaseUrl })})`,
        ),
      )
      lockResults = await runLocks({
        redisUrl: redis.url,
        databaseUrl,
        peers: locks,
        iterations: quick ? 50 : 300,
        contentionMs: quick ? 1_000 : 3_000,
        coupons: true,
        couponCount: quick ? 40 : 100,
        couponUsers: quick ? 50 : 120,
      })
      show(lockTables(lockResults))
      for (const row of lockResults.rows.filter((r) => r.firstError))
        console.log(dim(`  ${row.lock}: ${row.failures} failed acquisitions, first: ${row.firstError}`))
      for (const { lock, error } of lockResults.failed) console.log(`  ${lock} could not run: ${error}`)
    }
  } finally {
    await redis.stop()
  }

  if (values.markdown) {
    const summaries = [
      ...(macro ? [macroSummaryTable(macro)] : []),
      ...(lockResults ? [lockSummaryTable(lockResults)] : []),
    ]
    for (const table of [...summaries, ...tables]) console.log(`${renderMarkdown(table)}\n`)
  }
  const elapsedMs = Date.now() - startedAt.getTime()
  if (!values['no-files']) {
    const files = await writeCompareResults({
      startedAt: startedAt.toISOString(),
      elapsedMs,
      command: `npm run compare${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      machine: { ...machine, loadAverageAtStart: load },
      versions,
      configurations: {
        caches: Object.fromEntries(CACHE_PEERS.map((p) => [p.name, p.config])),
        locks: Object.fromEntries(LOCK_PEERS.map((p) => [p.name, p.config])),
      },
      quick,
      macro,
      macroWarmUp,
      micro,
      locks: lockResults,
    })
    for (const file of files) console.log(`wrote ${path.relative(process.cwd(), file)}`)
  }
  console.log(dim(`done in ${(elapsedMs / 1000).toFixed(0)} s, load average now ${loadavg()[0]!.toFixed(1)}`))
}

main().catch((error: unknown) => {
  console.error(error instanceof Error && error.message.startsWith('unknown') ? `${error.message}\n\n${USAGE}` : error)
  process.exitCode = 1
})
