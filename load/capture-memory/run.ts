/**
 * `npm run bench:capture-memory`: what buffering responses costs in memory (issue 9.9).
 *
 * N concurrent requests on N cold URLs of a route that returns BODY_KIB, written over
 * WRITE_MS: the worst case for captures, since every request is a miss, none can
 * coalesce, and every capture is alive at once. Each mode runs in a fresh process
 * (app.ts); the peak RSS it reports is compared against the goal
 *   peak with cacheRoute ≤ 2 × peak without + the capture budget.
 * Options: --requests 300 --body-kib 900 --write-ms 1000 --chunks 9 --modes none,cacheRoute,'cacheRoute, L1 64'.
 * Small writes: --requests 1 --body-kib 10240 --chunks 10485760 --write-ms 0 (10 MiB in 1-byte writes, in one loop).
 * Uses a private redis-server unless REDIS_URL is set.
 */
import http from 'node:http'
import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { forkTs } from '../shared/fork-ts.js'
import { findRedisServer, startPrivateRedis } from '../shared/redis-server.js'

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ''), process.argv[i + 1]!)
const requests = Number(args.get('requests') ?? 300)
const bodyKib = Number(args.get('body-kib') ?? 900)
const writeMs = Number(args.get('write-ms') ?? 1000)
const chunks = Number(args.get('chunks') ?? 9)
const modes = (args.get('modes') ?? 'none,cacheRoute,cacheRoute, L1 64').split(',') as Mode[]
const MiB = 1024 * 1024

interface Report {
  peakRss: number
  peakHeapUsed: number
  peakExternal: number
  rssAfterGc: number
  loopP99Ms: number
  budgetBytes: number | null
}

function once<T>(child: ChildProcess, kind: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { kind: string }) => {
      if (message.kind !== kind) return
      child.off('message', onMessage)
      resolve(message as T)
    }
    child.on('message', onMessage)
    child.once('exit', (code) => reject(new Error(`app exited (${code}) before ${kind}`)))
  })
}

function get(agent: http.Agent, port: number, path: string): Promise<{ bytes: number; cache: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      let bytes = 0
      res.on('data', (chunk: Buffer) => (bytes += chunk.length))
      res.on('end', () => resolve({ bytes, cache: String(res.headers['x-cache'] ?? '-') }))
      res.on('error', reject)
    })
    req.on('error', reject)
  })
}

type Mode = 'none' | 'cacheRoute' | 'cacheRoute, L1 64'

async function measure(mode: Mode, redisUrl: string) {
  const app = fileURLToPath(new URL('./app.ts', import.meta.url))
  const child = forkTs(app, {
    MODE: mode,
    REDIS_URL: redisUrl,
    BODY_KIB: String(bodyKib),
    CHUNKS: String(chunks),
    WRITE_MS: String(writeMs),
    NODE_OPTIONS: '--expose-gc',
  })
  try {
    const { port, baselineRss } = await once<{ port: number; baselineRss: number }>(child, 'ready')
    const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity })
    child.send({ kind: 'start' })
    const started = performance.now()
    const responses = await Promise.all(
      Array.from({ length: requests }, (_, i) => get(agent, port, `/item/${encodeURIComponent(mode)}-${i}`)),
    )
    const elapsedMs = performance.now() - started
    agent.destroy()
    const reportPromise = once<Report>(child, 'report')
    child.send({ kind: 'report' })
    const report = await reportPromise
    const complete = responses.filter((r) => r.bytes === bodyKib * 1024).length
    const outcomes: Record<string, number> = {}
    for (const r of responses) outcomes[r.cache] = (outcomes[r.cache] ?? 0) + 1
    return { mode, baselineRss, elapsedMs, complete, outcomes, ...report }
  } finally {
    if (child.exitCode === null) child.kill()
  }
}

const binary = findRedisServer()
if (!process.env.REDIS_URL && !binary) throw new Error('set REDIS_URL or install redis-server')
const privateRedis = process.env.REDIS_URL ? undefined : await startPrivateRedis()
const redisUrl = process.env.REDIS_URL ?? privateRedis!.url
try {
  console.log(
    `capture memory: ${requests} concurrent requests on ${requests} cold URLs, ${bodyKib} ` +
      `KiB each written in ${chunks} chunks over ${writeMs} ms; Node ${process.version}`,
  )
  const rows = []
  for (const mode of modes) rows.push(await measure(mode, redisUrl))
  const mib = (bytes: number) => `${(bytes / MiB).toFixed(0)} MiB`
  console.log(
    [
      'mode'.padEnd(17),
      'peak RSS'.padStart(9),
      'peak heap'.padStart(10),
      'peak buffers'.padStart(13),
      'RSS after GC'.padStart(13),
      'time'.padStart(8),
      'loop p99'.padStart(9),
      '  complete  X-Cache',
    ].join(' '),
  )
  for (const row of rows) {
    console.log(
      [
        row.mode.padEnd(17),
        mib(row.peakRss).padStart(9),
        mib(row.peakHeapUsed).padStart(10),
        mib(row.peakExternal).padStart(13),
        mib(row.rssAfterGc).padStart(13),
        `${(row.elapsedMs / 1000).toFixed(2)} s`.padStart(8),
        `${row.loopP99Ms.toFixed(0)} ms`.padStart(9),
        `  ${row.complete}/${requests}`.padEnd(10),
        JSON.stringify(row.outcomes),
      ].join(' '),
    )
  }
  const [none, ...cached] = rows as [(typeof rows)[0], ...typeof rows]
  for (const row of cached) {
    const stored = (row.outcomes.MISS ?? 0) * bodyKib * 1024
    if (row.budgetBytes === null) {
      console.log(
        `${row.mode}: this build has no capture budget (DEFAULT_CAPTURE_BUDGET_BYTES is not exported); ${mib(stored)} of bodies stored`,
      )
      continue
    }
    const bound = 2 * none.peakRss + row.budgetBytes
    console.log(
      `${row.mode}: peak RSS ${mib(row.peakRss)} ≤ 2 × ${mib(none.peakRss)} + budget ${mib(row.budgetBytes)} = ${mib(bound)}: ` +
        `${row.peakRss <= bound ? 'met' : 'NOT met'} (${mib(stored)} of bodies stored, all kept in L1 unless it is bounded)`,
    )
  }
} finally {
  await privateRedis?.stop()
}
