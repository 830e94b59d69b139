/**
 * `npm run load -- --framework LIST`: requests per second of the same route bare and
 * behind each framework's stampede-guard adapter (cached: every request after the first
 * is a hit). One child process serves the framework (server.ts); autocannon runs here.
 * Rounds alternate which route goes first, so drift on a shared machine hits both.
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
  /** Requests answered with anything but 200, or errors (should be 0). */
  failures: number
}

export interface FrameworkRunOptions {
  redisUrl: string
  durationSec: number
  connections: number
  rounds: number
}

export async function runFrameworks(frameworks: Framework[], options: FrameworkRunOptions): Promise<FrameworkResult[]> {
  const results: FrameworkResult[] = []
  for (const framework of frameworks) {
    const child = forkTs(fileURLToPath(new URL('./server.ts', import.meta.url)), {
      FRAMEWORK: framework,
      REDIS_URL: options.redisUrl,
    })
    try {
      const port = await portOf(child)
      const bare: number[] = []
      const cached: number[] = []
      let failures = 0
      for (const path of ['/bare', '/cached']) await fetch(`http://127.0.0.1:${port}${path}`) // warm up; stores /cached
      for (let round = 0; round < options.rounds; round++) {
        const order = round % 2 === 0 ? (['bare', 'cached'] as const) : (['cached', 'bare'] as const)
        for (const route of order) {
          const result = await cannon(`http://127.0.0.1:${port}/${route}`, options)
          ;(route === 'bare' ? bare : cached).push(result.requests.average)
          failures += result.non2xx + result.errors + result.timeouts
        }
      }
      results.push({ framework, bare: mean(bare), cached: mean(cached), failures })
    } finally {
      child.disconnect()
      await new Promise((resolve) => (child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve)))
    }
  }
  return results
}

export function renderFrameworkTable(results: FrameworkResult[]): string {
  const lines = [
    '| framework | bare req/s | cached req/s | cached / bare | non-2xx or errors |',
    '| --- | ---: | ---: | ---: | ---: |',
  ]
  for (const r of results)
    lines.push(
      `| ${r.framework} | ${Math.round(r.bare).toLocaleString('en-US')} | ${Math.round(r.cached).toLocaleString('en-US')} | ${(r.cached / r.bare).toFixed(2)} | ${r.failures} |`,
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

function cannon(url: string, options: FrameworkRunOptions): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    autocannon(
      { url, connections: options.connections, duration: options.durationSec, timeout: 10 },
      (error, result) => (error ? reject(error) : resolve(result)),
    )
  })
}

const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / values.length
