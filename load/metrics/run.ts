/**
 * `npm run metrics -- URL [--every 2s] [--times N]`: scrapes a Prometheus /metrics
 * endpoint (an app that called `instrument(cache, …)` with the OpenTelemetry Prometheus
 * exporter, e.g. examples/express-metrics.ts --serve) and prints each cache's hit ratio.
 * With --every it scrapes repeatedly and prints the ratio over each interval too.
 */
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseDuration } from '../../src/duration.js'
import { countsBetween, describeCounts, scrapeCacheCounts, type CacheCounts } from './cache-summary.js'

const USAGE = `Usage: npm run metrics -- URL [--every DURATION] [--times N]

  URL               the /metrics endpoint, e.g. http://127.0.0.1:9464/metrics (127.0.0.1 only)
  --every DURATION  scrape again after this long ('2s', 500), printing each interval's ratio
  --times N         how many scrapes with --every (default: until interrupted)
`

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    options: { every: { type: 'string' }, times: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    allowPositionals: true,
  })
  if (values.help || positionals.length !== 1) {
    console.log(USAGE)
    if (!values.help) process.exitCode = 2
    return
  }
  const url = new URL(positionals[0]!)
  if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost')
    throw new Error(`only loopback endpoints are scraped, got ${url.hostname}`)
  const everyMs =
    values.every === undefined
      ? undefined
      : parseDuration('--every', /^\d+$/.test(values.every) ? Number(values.every) : values.every)
  const times = values.times === undefined ? (everyMs ? Infinity : 1) : Number(values.times)
  if (!Number.isInteger(times) && times !== Infinity)
    throw new Error(`--times must be a whole number, got ${values.times}`)

  let previous: Map<string, CacheCounts> | undefined
  for (let scrape = 1; scrape <= times; scrape++) {
    const counts = await scrapeCacheCounts(url.href)
    if (counts.size === 0) console.log(`${new Date().toISOString()} no stampede-guard metrics at ${url.href}`)
    for (const [name, total] of counts) {
      const label = name === '' ? 'cache' : `cache ${name}`
      const interval = previous
        ? `   last ${everyMs} ms: ${describeCounts(countsBetween(previous.get(name), total))}`
        : ''
      console.log(`${new Date().toISOString()} ${label}: ${describeCounts(total)}${interval}`)
    }
    previous = counts
    if (everyMs && scrape < times) await sleep(everyMs)
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err)
  process.exitCode = 1
})
