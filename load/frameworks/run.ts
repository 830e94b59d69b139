/**
 * `npm run load -- --framework LIST`: requests per second of the same route bare and
 * behind each framework's stampede-guard adapter (cached: every request after the first
 * is a hit). One child process serves the framework (server.ts); autocannon runs here.
 * Rounds alternate which route goes first, so drift on a shared machine hits both.
 * Besides req/s it reports the server's CPU time per request (its `process.cpuUsage()`
 * around each run, divided by the requests answered): on a shared machine req/s swing
 * with the neighbours' load, CPU per request much less.
 */
import autocannon from 'autocannon'
import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { forkTs } from '../shared/fork-ts.js'
import type { Framework } from './apps.js'

export interface FrameworkResult {
  framework: Framework
  /** Mean requests per second over the rounds. */
  bare: number
  cached: number
  /** Server CPU time (user + system) per request, microseconds, over all rounds. */
  bareCpuUs: number
  cachedCpuUs: number
  /** Per round, bare CPU per request ÷ cached CPU per request: the two runs of a round are minutes closer than the means. */
  cpuRatios: number[]
  /** Requests answered with anything but 200, or errors (should be 0). */
  failures: number
}

export interface FrameworkRunOptions {
  redisUrl: string
  durationSec: number
  connections: number
  rounds: number
  /** LOAD_CPU_PROF: a directory the server writes a V8 CPU profile to when it exits. */
  cpuProfileDir?: string
}

export async function runFrameworks(frameworks: Framework[], options: FrameworkRunOptions): Promise<FrameworkResult[]> {
  const results: FrameworkResult[] = []
  for (const framework of frameworks) {
    const child = forkTs(
      fileURLToPath(new URL('./server.ts', import.meta.url)),
      { FRAMEWORK: framework, REDIS_URL: options.redisUrl },
      options.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`] : [],
    )
    try {
      const port = await portOf(child)
      const bare: number[] = []
      const cached: number[] = []
      const cpu = { bare: { us: 0, requests: 0 }, cached: { us: 0, requests: 0 } }
      const cpuRatios: number[] = []
      let failures = 0
      for (const path of ['/bare', '/cached']) await fetch(`http://127.0.0.1:${port}${path}`) // warm up; stores /cached
      for (let round = 0; round < options.rounds; round++) {
        const order = round % 2 === 0 ? (['bare', 'cached'] as const) : (['cached', 'bare'] as const)
        const roundCpu = { bare: 0, cached: 0 }
        for (const route of order) {
          const before = await cpuOf(child)
          const result = await cannon(`http://127.0.0.1:${port}/${route}`, options)
          const after = await cpuOf(child)
          ;(route === 'bare' ? bare : cached).push(result.requests.average)
          const us = after.user + after.system - before.user - before.system
          cpu[route].us += us
          cpu[route].requests += result.requests.total
          roundCpu[route] = us / result.requests.total
          failures += result.non2xx + result.errors + result.timeouts
        }
        cpuRatios.push(roundCpu.bare / roundCpu.cached)
      }
      results.push({
        framework,
        bare: mean(bare),
        cached: mean(cached),
        bareCpuUs: cpu.bare.us / cpu.bare.requests,
        cachedCpuUs: cpu.cached.us / cpu.cached.requests,
        cpuRatios,
        failures,
      })
    } finally {
      child.disconnect()
      await new Promise((resolve) => (child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve)))
    }
  }
  return results
}

export function renderFrameworkTable(results: FrameworkResult[]): string {
  const lines = [
    '| framework | bare req/s | cached req/s | cached / bare | bare µs CPU/req | cached µs CPU/req | bare CPU / cached CPU | median round (each round) | non-2xx or errors |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |',
  ]
  const count = (n: number) => Math.round(n).toLocaleString('en-US')
  for (const r of results)
    lines.push(
      `| ${r.framework} | ${count(r.bare)} | ${count(r.cached)} | ${(r.cached / r.bare).toFixed(2)} | ${r.bareCpuUs.toFixed(0)} | ${r.cachedCpuUs.toFixed(0)} | ${(r.bareCpuUs / r.cachedCpuUs).toFixed(2)} | ${median(r.cpuRatios).toFixed(2)} (${r.cpuRatios.map((x) => x.toFixed(2)).join(' ')}) | ${r.failures} |`,
    )
  return lines.join('\n')
}

function portOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the framework server did not start within 60 s')), 60_000)
    child.once('message', (message: { port: number }) => {
      clearTimeout(timer)
      resolve(message.port)
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`the framework server exited (${code})`))
    })
  })
}

/** The server's `process.cpuUsage()`, asked over IPC (server.ts answers). */
let cpuAsks = 0
function cpuOf(child: ChildProcess): Promise<NodeJS.CpuUsage> {
  const id = ++cpuAsks
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the framework server did not report its CPU within 10 s')), 10_000)
    const onMessage = (message: { cpu?: number; usage?: NodeJS.CpuUsage }) => {
      if (message.cpu !== id || !message.usage) return
      clearTimeout(timer)
      child.off('message', onMessage)
      resolve(message.usage)
    }
    child.on('message', onMessage)
    child.send({ cpu: id })
  })
}

function cannon(url: string, options: FrameworkRunOptions): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(
      { url, connections: options.connections, duration: options.durationSec, timeout: 10 },
      (error, result) => (error ? reject(error) : resolve(result)),
    )
  })
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length / 2
  return Number.isInteger(middle) ? (sorted[middle - 1]! + sorted[middle]!) / 2 : sorted[Math.floor(middle)]!
}

const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length
