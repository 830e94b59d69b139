/**
 * `npm run load -- [options]`: every requested scenario × mode, then per scenario a
 * table and a chart, and the JSON + SVG files under load/results/.
 */
import { parseCliArgs, USAGE } from './cli-args.js'
import { runLoad } from './harness.js'
import { sourceKindFromEnv } from './db/source.js'
import { progressBar } from './report/progress.js'
import { bold, dim } from './report/format.js'
import { renderMarkdownTable, renderTable } from './report/table.js'
import { renderTerminalChart } from './report/terminal-chart.js'
import { writeResults } from './report/results-file.js'
import path from 'node:path'

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

  const progress = progressBar()
  const results = await runLoad({
    scenarios: options.scenarios,
    modes: options.modes,
    workers: options.workers,
    dbLatencyMs: options.dbLatencyMs,
    timeScale: options.timeScale,
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
      onScenarioEnd(scenario) {
        progress.printAbove(() => {
          console.log(bold(`■ ${scenario.title}`))
          console.log(dim(`  ${scenario.connections} connections, ${(scenario.durationMs / 1000).toFixed(1)} s per mode`))
          console.log(renderTable(scenario))
          console.log('')
          console.log(renderTerminalChart(scenario))
          console.log('')
        })
      },
    },
  }).finally(() => progress.stop())

  for (const note of results.notes) console.log(`note: ${note}`)
  if (options.markdown) {
    for (const scenario of results.scenarios.filter((s) => s.modes.length > 0)) {
      console.log(`\n**${scenario.title}** (${scenario.connections} connections, ${(scenario.durationMs / 1000).toFixed(1)} s per mode)\n`)
      console.log(renderMarkdownTable(scenario))
    }
    console.log('')
  }
  if (options.writeFiles) {
    const files = await writeResults(results)
    console.log(`results: ${path.relative(process.cwd(), files.json)}`)
    for (const svg of files.svgs) console.log(`chart:   ${path.relative(process.cwd(), svg)}`)
  }
  console.log(dim(`done in ${(results.elapsedMs / 1000).toFixed(1)} s on ${results.machine.cpus} × ${results.machine.cpuModel}, Node ${results.machine.node}`))
}

main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})
