/**
 * One worker process of the load-test app: Express serving GET /item/:id.
 *
 * Started by load/stampede/app/primary.ts through node:cluster. The primary tells it which mode
 * to run (a fresh cache per run, so every run starts cold) and collects its DB query
 * counts and cache counters at the end of each run.
 */
import { pathToFileURL } from 'node:url'
import express from 'express'
import { Redis } from 'ioredis'
import { FaultInjectingSource } from '../db/fault-injection.js'
import { PostgresSource } from '../db/postgres-source.js'
import { QueryCounter } from '../db/query-counter.js'
import { SlowSource } from '../db/slow-source.js'
import { ITEM_COUNT, type Item, type ItemSource, type SourceKind } from '../db/source.js'
import { createItemLoader, type ItemLoader } from './item-loader.js'
import { MissProbe } from './miss-probe.js'
import type { PrimaryToWorker, RunConfig, WorkerToPrimary } from './protocol.js'

const redisUrl = process.env.LOAD_REDIS_URL || undefined
const sourceKind = JSON.parse(process.env.LOAD_SOURCE ?? '{"kind":"builtin"}') as SourceKind

function send(message: WorkerToPrimary): void {
  process.send?.(message)
}

let run: RunConfig | undefined
let counter = new QueryCounter('none')
let loader: ItemLoader | undefined
/** Age of the oldest value this worker answered with during the run: now − when the database read it. */
let oldestServedMs = 0

const latency = () => run?.dbLatencyMs ?? 0
const baseSource: ItemSource =
  sourceKind.kind === 'postgres' ? new PostgresSource(sourceKind.url, latency) : new SlowSource(latency)
const database = new FaultInjectingSource(baseSource)
/** Off unless the run asks for it (RunConfig.probe): then every Redis command of this process is counted and timed. */
const probe = new MissProbe()
probe.install()

// stampede-guard gets a default client: its own command timeouts and circuit breaker decide.
// LOAD_AUTO_PIPELINING=1 turns on ioredis's enableAutoPipelining on it (to measure what it costs or saves).
const redis = redisUrl
  ? new Redis(redisUrl, process.env.LOAD_AUTO_PIPELINING === '1' ? { enableAutoPipelining: true } : {})
  : undefined
// The naive baseline fails fast when Redis is down instead of queueing for ever.
let naiveRedis: Redis | undefined
const getNaiveRedis = (): Redis => {
  if (!redisUrl) throw new Error('the naive mode needs Redis')
  if (!naiveRedis) {
    naiveRedis = new Redis(redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 1000 })
    naiveRedis.on('error', () => {}) // the outage scenario: reported as misses, not crashes
  }
  return naiveRedis
}
// A Redis outage is a scenario, not a crash.
redis?.on('error', () => {})

/** One counted query. The counter is captured when the query starts, so a query started by
 * the previous run's cache (a late background refresh) never lands in this run's numbers. */
function queryDatabase(id: number): Promise<Item> {
  const runCounter = counter
  runCounter.recordQuery()
  const item = String(id)
  const startedAt = probe.loaderStarted(item)
  return database.load(id).then(
    (loaded) => {
      probe.loaderEnded(item, startedAt)
      return loaded
    },
    (err: unknown) => {
      probe.loaderEnded(item, startedAt)
      runCounter.recordFailure()
      throw err
    },
  )
}

/** LOAD_ITEM_LOADER: another module's `createItemLoader`, with modes of its own (load/compare/); imported before listening. */
const loaderModule = process.env.LOAD_ITEM_LOADER
const createLoader: typeof createItemLoader = loaderModule
  ? ((await import(pathToFileURL(loaderModule).href)) as { createItemLoader: typeof createItemLoader }).createItemLoader
  : createItemLoader

/** CPU usage when the current run was configured: each run reports only its own. */
let cpuAtConfigure = process.cpuUsage()

async function configure(next: RunConfig): Promise<void> {
  const previous = loader
  loader = undefined
  await previous?.close().catch(() => {})
  database.failureRate = 0
  run = next
  oldestServedMs = 0
  counter = new QueryCounter(next.runId)
  probe.active = false
  loader = await createLoader(next, { queryDatabase, redis, naiveRedis: getNaiveRedis, probe })
  if (next.probe) probe.start()
  cpuAtConfigure = process.cpuUsage()
  send({ type: 'configured', runId: next.runId })
}

function cpuMsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start)
  return (used.user + used.system) / 1000
}

process.on('message', (message: PrimaryToWorker) => {
  switch (message.type) {
    case 'configure':
      configure(message.run).catch((err: unknown) =>
        send({ type: 'fatal', message: `configure failed: ${String(err)}` }),
      )
      break
    case 'db-failure-rate':
      database.failureRate = message.rate
      break
    case 'collect': {
      const { bins, failedQueries } = counter.totals()
      send({
        type: 'collected',
        runId: message.runId,
        bins,
        failedQueries,
        stats: loader?.stats() ?? {},
        oldestServedMs,
        cpuMs: cpuMsSince(cpuAtConfigure),
        ...(run?.probe ? { probe: probe.take() } : {}),
      })
      break
    }
  }
})

// Live counts for the progress bar, 4× a second; unref'd so it never keeps the worker alive.
setInterval(() => {
  const bins = counter.takePending()
  if (Object.keys(bins).length > 0) send({ type: 'queries', runId: counter.runId, bins })
}, 250).unref()

const app = express()
app.disable('x-powered-by')
app.disable('etag')

app.get('/item/:id', async (req, res) => {
  const id = Number(req.params.id)
  if (!Number.isInteger(id) || id < 1 || id > ITEM_COUNT) {
    res.status(404).json({ error: 'no such item' })
    return
  }
  if (!loader) {
    res.status(503).json({ error: 'not configured yet' })
    return
  }
  probe.requestStarted(req.params.id)
  try {
    const item = await loader.get(id)
    oldestServedMs = Math.max(oldestServedMs, Date.now() - item.loadedAt)
    res.json(item)
  } catch (err) {
    res.status(503).json({ error: err instanceof Error ? err.message : String(err) })
  } finally {
    probe.requestEnded(req.params.id)
  }
})

// Port 0 under node:cluster: the primary binds one random port and every worker shares it.
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address()
  send({ type: 'listening', port: typeof address === 'object' && address ? address.port : 0 })
})
// Many short keep-alive connections from autocannon: don't let the default 5 s timeout reset them mid-run.
server.keepAliveTimeout = 60_000

// If the primary goes away, so do we (no orphaned workers holding the port).
process.on('disconnect', () => process.exit(0))
// Profiled (LOAD_CPU_PROF, see primary.ts): leave by exit() on the primary's SIGTERM, so V8 writes the profile.
if (process.env.LOAD_CPU_PROF) process.on('SIGTERM', () => process.exit(0))
