/**
 * `npm run load -- [options]`: every requested scenario × mode, then per scenario a
 * table and a chart, and the JSON + SVG files under load/results/.
 */
import { parseCliArgs, USAGE } from './cli-args.js'
import { runLoad } from './harness.js'
import { sourceKindFromEnv } from './db/source.js'
import { progressBar } from './report/progress.js'
import { bold, dim } from '../shared/format.js'
import { renderMarkdownTable, renderTable } from './report/table.js'
import { renderTerminalChart } from './report/terminal-chart.js'
import { renderPhases } from './report/phases.js'
import { renderRepeats } from './report/repeats.js'
import { describeWarmUp } from './warm-up.js'
import { writeResults } from './report/results-file.js'
import path from 'node:path'
import { CONTENDERS } from './coupons/contenders.js'
import { COUPON_CONTENDERS, renderCouponTable, runCouponScenario } from './coupons/scenario.js'
import { describeSource } from './db/source.js'
import { benchRedis, findRedisServer, startPrivateRedis } from '../shared/redis-server.js'
import { renderFrameworkTable, runFrameworks } from '../frameworks/run.js'

async function main(): Promise<void> {
  let options
  try {
    options = parseCliArgs(process.argv.slice(2))
  } catch (err) {
    console.error(`${(err as Error).message}\n\n${USAGE}`)
    process.exitCode = 2
    return
  }
  if (options.help) {
    console.log(USAGE)
    return
  }

  if (options.frameworks.length > 0) return runFrameworkThroughput(options)
  if (options.coupons) await runCoupons(options.contenders)
  if (options.scenarios.length === 0) return

  const progress = progressBar()
  const results = await runLoad({
    scenarios: options.scenarios,
    modes: options.modes,
    workers: options.workers,
    dbLatencyMs: options.dbLatencyMs,
    timeScale: options.timeScale,
    repeat: options.repeat,
    warmUpBudgetMs: options.warmUpMs,
    connections: options.connections,
    redisUrl: process.env.REDIS_URL || undefined,
    noPrivateRedis: options.noPrivateRedis,
    source: sourceKindFromEnv(),
    events: {
      ...progress,
      onPlan(plan) {
        console.log(bold('stampede-guard load test'))
        console.log(`  app:      ${plan.workers} Express workers (node:cluster) on 127.0.0.1`)
        console.log(`  redis:    ${plan.redis}`)
        console.log(`  database: ${plan.database}, ${options.dbLatencyMs} ms per query`)
        console.log(`  traffic:  ${(plan.totalMs / 1000).toFixed(0)} s in total (autocannon, 127.0.0.1 only)`)
        for (const note of plan.notes) console.log(`  note:     ${note}`)
        console.log('')
        progress.onPlan?.(plan)
      },
      onWarmUp(report, modes) {
        progress.printAbove(() => console.log(dim(`  ${describeWarmUp(report, modes)}\n`)))
      },
      onScenarioEnd(scenario) {
        progress.printAbove(() => {
          console.log(bold(`■ ${scenario.title}`))
          console.log(
            dim(`  ${scenario.connections} connections, ${(scenario.durationMs / 1000).toFixed(1)} s per mode`),
          )
          console.log(renderTable(scenario))
          console.log('')
          const repeats = renderRepeats(scenario)
          if (repeats) console.log(`${repeats}\n`)
          const phases = renderPhases(scenario)
          if (phases) console.log(`${phases}\n`)
          console.log(renderTerminalChart(scenario))
          console.log('')
        })
      },
    },
  }).finally(() => progress.stop())

  for (const note of results.notes) console.log(`note: ${note}`)
  if (options.markdown) {
    for (const scenario of results.scenarios.filter((s) => s.modes.length > 0)) {
      console.log(
        `\n**${scenario.title}** (${scenario.connections} connections, ${(scenario.durationMs / 1000).toFixed(1)} s per mode)\n`,
      )
      console.log(renderMarkdownTable(scenario))
    }
    console.log('')
  }
  if (options.writeFiles) {
    const files = await writeResults(results)
    console.log(`results: ${path.relative(process.cwd(), files.json)}`)
    for (const svg of files.svgs) console.log(`chart:   ${path.relative(process.cwd(), svg)}`)
  }
  console.log(
    dim(
      `done in ${(results.elapsedMs / 1000).toFixed(1)} s on ${results.machine.cpus} × ${results.machine.cpuModel}, Node ${results.machine.node}`,
    ),
  )
}

/** `--scenario coupons`: Redis from REDIS_URL or a private redis-server; PostgreSQL from DATABASE_URL. */
async function runCoupons(requested: string[] | undefined): Promise<void> {
  const contenders = requested ?? COUPON_CONTENDERS
  const unknown = contenders.filter((name) => !COUPON_CONTENDERS.includes(name))
  if (unknown.length > 0)
    throw new Error(`unknown contender ${unknown.join(', ')} (expected one of: ${COUPON_CONTENDERS.join(', ')})`)
  const binary = findRedisServer()
  if (!process.env.REDIS_URL && !binary)
    throw new Error('the coupons scenario needs a Redis: set REDIS_URL or install redis-server')
  const privateRedis = process.env.REDIS_URL ? undefined : await startPrivateRedis()
  const redisUrl = process.env.REDIS_URL || privateRedis!.url
  const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  console.log(bold('■ coupons: 1,000 coupons, 1,200 users, 4 app processes × 4 issues in flight, one PostgreSQL row'))
  console.log(
    dim(
      `  redis ${privateRedis ? 'private redis-server' : 'REDIS_URL'}, database ${describeSource({ kind: 'postgres', url: databaseUrl })}`,
    ),
  )
  for (const name of contenders) console.log(dim(`  ${name}: ${CONTENDERS[name]!.describe}`))
  try {
    const results = await runCouponScenario({ redisUrl, databaseUrl, contenders })
    console.log(renderCouponTable(results, 1_000, 1_200))
    for (const r of results.filter((r) => r.errors.length > 0))
      console.log(dim(`  ${r.contender}: first error: ${r.errors[0]}`))
    console.log('')
  } finally {
    await privateRedis?.stop()
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})

/** `--framework`: req/s bare and cached per framework (load/frameworks/), against REDIS_URL or a private redis-server. */
async function runFrameworkThroughput(options: Awaited<ReturnType<typeof parseCliArgs>>): Promise<void> {
  const { url, privateServer } = await benchRedis('npm run load -- --framework')
  try {
    const durationSec = Math.max(1, Math.round(5 * options.timeScale))
    const connections = options.connections ?? 50
    const rounds = Math.max(2, options.repeat)
    console.log(
      bold(
        `Frameworks: ${options.frameworks.join(', ')}; ${durationSec} s per route, ${rounds} rounds, ${connections} connections`,
      ),
    )
    const results = await runFrameworks(options.frameworks, {
      redisUrl: url,
      durationSec,
      connections,
      rounds,
      cpuProfileDir: process.env.LOAD_CPU_PROF,
    })
    console.log(renderFrameworkTable(results))
  } finally {
    await privateServer?.stop()
  }
}
