/**
 * `npm run bench:frameworks [-- --seconds 3 --rounds 3 --framework express,fastify,hono]`:
 * req/s of the same route bare and behind stampede-guard, per framework. Each framework's
 * app runs in a child process (load/frameworks/app.ts) on a private redis-server (or
 * REDIS_URL); autocannon (20 connections, 127.0.0.1) alternates bare and cached for a
 * number of rounds, and the median of the rounds is reported with the cached/bare ratio.
 */
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { BenchChild } from '../shared/bench-child.js'
import { benchRedis } from '../shared/redis-server.js'

const args = process.argv.slice(2)
const flag = (name: string, fallback: string) => {
  const index = args.indexOf(`--${name}`)
  return index >= 0 && args[index + 1] !== undefined ? args[index + 1]! : fallback
}
const SECONDS = Number(flag('seconds', '3'))
const ROUNDS = Number(flag('rounds', '3'))
const FRAMEWORKS = flag('framework', 'express,fastify,hono').split(',')
const CONNECTIONS = 20

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

async function requestsPerSecond(url: string): Promise<number> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS })
  if (result.errors > 0 || result.non2xx > 0)
    throw new Error(`${url}: ${result.errors} errors, ${result.non2xx} non-2xx`)
  return result.requests.average
}

const { url: redisUrl, privateServer } = await benchRedis('bench:frameworks')
const rows: string[] = []
try {
  for (const framework of FRAMEWORKS) {
    const child = new BenchChild<{ type: 'ready'; port: number }, never>(
      fileURLToPath(new URL('./app.ts', import.meta.url)),
      { FRAMEWORK: framework, REDIS_URL: redisUrl },
      30_000,
    )
    const { port } = await child.next('ready')
    const base = `http://127.0.0.1:${port}`
    await fetch(`${base}/cached`) // the first request fills the entry
    const bare: number[] = []
    const cached: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      bare.push(await requestsPerSecond(`${base}/bare`))
      cached.push(await requestsPerSecond(`${base}/cached`))
    }
    const [b, c] = [median(bare), median(cached)]
    const row = `| ${framework} | ${Math.round(b).toLocaleString('en')} | ${Math.round(c).toLocaleString('en')} | ${(c / b).toFixed(2)} |`
    console.log(`${row}   rounds bare ${bare.map(Math.round).join(', ')}; cached ${cached.map(Math.round).join(', ')}`)
    rows.push(row)
    child.proc.kill()
  }
} finally {
  await privateServer?.stop()
}
console.log(`\n${SECONDS} s × ${ROUNDS} rounds per route, ${CONNECTIONS} connections, medians:\n`)
console.log('| framework | bare req/s | cached req/s | cached / bare |')
console.log('| --------- | ---------: | -----------: | ------------: |')
for (const row of rows) console.log(row)
