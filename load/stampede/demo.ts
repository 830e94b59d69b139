/**
 * `npm run demo`: the short form of the load test (cold + expiry, under a minute), with
 * a running commentary for someone who has never seen a cache stampede.
 *
 * Uses REDIS_URL if set, else starts a private redis-server if one is installed, else
 * runs in in-process mode and says what that changes.
 */
import path from 'node:path'
import { runLoad } from './harness.js'
import { sourceKindFromEnv } from './db/source.js'
import { DEFAULT_MODES, MODE_DESCRIPTIONS } from './modes.js'
import { findRedisServer } from '../shared/redis-server.js'
import { getScenario, type ScenarioName } from './scenarios.js'
import { bold, dim } from '../shared/format.js'
import { explainResults } from './report/narrative.js'
import { progressBar } from './report/progress.js'
import { writeResults } from './report/results-file.js'
import { renderTable } from './report/table.js'
import { renderTerminalChart } from './report/terminal-chart.js'

const SCENARIOS: ScenarioName[] = ['cold', 'expiry']
/** 0.8: the cold burst gets 2.4 s and the expiring key 8 s per mode, so the demo stays under a minute. */
const TIME_SCALE = 0.8
const WORKERS = 4
const DB_LATENCY_MS = 50

const redisUrl = process.env.REDIS_URL || undefined
/** `--no-private-redis` shows what a machine without redis-server gets (in-process mode). */
const noPrivateRedis = process.argv.includes('--no-private-redis')
const sharedRedis = Boolean(redisUrl || (!noPrivateRedis && findRedisServer()))
const wrap = (text: string, indent = '  ') => text.replace(/(.{1,88})(\s+|$)/g, `${indent}$1\n`).trimEnd()

console.log(bold('stampede-guard demo'))
console.log(
  wrap(
    `A cache "stampede" happens when a popular entry is missing or has just expired and many requests ask for it at the same time: ` +
      `each one misses, and each one queries the database. stampede-guard lets exactly one of them load the value, across every ` +
      `process that shares the Redis, and hands the result to all the others.`,
  ),
)
console.log('')
console.log(bold('The setup'))
console.log(`  ${WORKERS} Express server processes (node:cluster), all on one port, serving GET /item/:id`)
console.log(
  `  a "database" where every query takes ${DB_LATENCY_MS} ms ` +
    `(${sourceKindFromEnv().kind === 'postgres' ? 'PostgreSQL from DATABASE_URL' : 'built in, so the demo runs anywhere'})`,
)
if (redisUrl) console.log(`  Redis from REDIS_URL`)
else if (sharedRedis)
  console.log(`  a private redis-server on a free 127.0.0.1 port, started now and stopped at the end`)
else {
  console.log(
    `  ${bold('no Redis')}: REDIS_URL is not set and ` +
      `${noPrivateRedis ? '--no-private-redis was given' : 'redis-server is not installed'}, so this runs in IN-PROCESS mode:`,
  )
  console.log(
    `  each process has its own cache, and "one loader per miss" holds per process, not across all ${WORKERS}.`,
  )
  console.log(`  Install redis-server (apt-get install redis-server) to see the real thing.`)
}
console.log(`  autocannon as the clients, on 127.0.0.1 only`)
console.log('')
console.log(bold('Four ways to serve the same requests, one after the other:'))
for (const mode of DEFAULT_MODES) {
  if (mode === 'naive' && !sharedRedis) continue
  console.log(`  ${mode.padEnd(6)} ${MODE_DESCRIPTIONS[mode]}`)
}
console.log('')
console.log(bold('How to read the tables'))
console.log(`  DB queries   how many times the database was queried: the number this library exists to shrink`)
console.log(`  peak/s       the most queries in any one second: what the database must survive`)
console.log(`  vs none      how many times fewer queries than with no cache at all`)
console.log(`  req/s, p50/p99/max ms   throughput and latency seen by the clients; non-2xx: failed requests`)
console.log(`  stale served answers given from a value past its TTL while it was being refreshed`)
console.log(`  stale %      stale served as a share of all answers`)
console.log(`  oldest served  the age of the oldest value any answer carried, counted from the database read (a fresh`)
console.log(`               value is up to one TTL old, so this is above 0 even with nothing stale served)`)
console.log(`  chart        DB queries per second, each point the average over one bucket (100 ms or more)`)
console.log('')

const progress = progressBar()
let index = 0
const results = await runLoad({
  scenarios: SCENARIOS,
  modes: [...DEFAULT_MODES],
  workers: WORKERS,
  dbLatencyMs: DB_LATENCY_MS,
  timeScale: TIME_SCALE,
  redisUrl,
  noPrivateRedis,
  source: sourceKindFromEnv(),
  events: {
    ...progress,
    onPlan(plan) {
      const first = getScenario(SCENARIOS[0]!, TIME_SCALE)
      progress.printAbove(() => {
        console.log(bold(`Scenario 1/${SCENARIOS.length}: ${first.title}`))
        console.log(wrap(first.explain))
        console.log(dim(`  (running ${plan.totalMs / 1000} s of traffic in total; a progress bar shows where we are)`))
        console.log('')
      })
      progress.onPlan?.(plan)
    },
    onScenarioEnd(scenario) {
      index++
      progress.printAbove(() => {
        console.log(renderTable(scenario))
        console.log('')
        console.log(renderTerminalChart(scenario))
        console.log('')
        console.log(bold('What you are looking at'))
        for (const line of explainResults(scenario, { workers: WORKERS, sharedRedis, dbLatencyMs: DB_LATENCY_MS }))
          console.log(wrap(line))
        console.log('')
        const next = SCENARIOS[index]
        if (next) {
          const s = getScenario(next, TIME_SCALE)
          console.log(bold(`Scenario ${index + 1}/${SCENARIOS.length}: ${s.title}`))
          console.log(wrap(s.explain))
          console.log('')
        }
      })
    },
  },
}).finally(() => progress.stop())

const files = await writeResults(results)
console.log(bold('Next'))
console.log(
  `  the numbers as JSON: ${path.relative(process.cwd(), files.json)}; the charts as SVG: ${files.svgs.map((f) => path.relative(process.cwd(), f)).join(', ')}`,
)
console.log(`  the full comparison (also a Zipf key mix and a failing database): npm run load`)
console.log(`  how waiters in other processes are woken, measured: npm run bench:wakeup`)
console.log(`  more in docs/load-testing.md; runnable examples in examples/`)
console.log(
  dim(
    `  (demo took ${(results.elapsedMs / 1000).toFixed(0)} s on ${results.machine.cpus} × ${results.machine.cpuModel})`,
  ),
)
