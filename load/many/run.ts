/**
 * `npx tsx load/many/run.ts`: 1,000 keys, 900 of them in Redis, asked for at once:
 * `getOrLoadMany` (one call of a batch loader) against `Promise.all` of 1,000 `getOrLoad`s
 * (a loader per missing key), L1 off so every key goes to Redis. Reports, per way, the
 * median wall time of one call, the commands the client sent (script calls as one each)
 * and the database queries (loader or batch-loader calls), over ROUNDS rounds on fresh keys.
 * Each query sleeps QUERY_MS (default 2 ms), as a database round trip would.
 * Uses a private redis-server when REDIS_URL is unset.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import { benchRedis } from '../shared/redis-server.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7)
const KEYS = 1_000
const QUERY_MS = Number(process.env.QUERY_MS ?? 2)

const { url, privateServer } = await benchRedis('load/many')

/** A client counting the commands it sends. */
function countingClient(): { client: Redis; sent: () => number } {
  const client = new Redis(url)
  let sent = 0
  const send = client.sendCommand.bind(client)
  client.sendCommand = ((...args: unknown[]) => {
    sent++
    return (send as (...a: unknown[]) => unknown)(...args)
  }) as typeof client.sendCommand
  return { client, sent: () => sent }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

interface Round {
  ms: number
  commands: number
  queries: number
}

async function round(way: 'many' | 'single', prefix: string): Promise<Round> {
  const keys = Array.from({ length: KEYS }, (_, i) => `${prefix}:${i}`)
  const seedClient = new Redis(url)
  const seeder = createCache({ redis: seedClient, ttl: '5m', l1: false })
  await seeder.getOrLoadMany(
    keys.filter((_, i) => i % 10 !== 0),
    (got) => got.map((key) => ({ key, seeded: true })),
  )
  await seeder.close()
  seedClient.disconnect()
  const { client, sent } = countingClient()
  const cache = createCache({ redis: client, ttl: '5m', l1: false })
  await cache.ready()
  let queries = 0
  const before = sent()
  const started = performance.now()
  if (way === 'many') {
    await cache.getOrLoadMany(keys, async (got) => {
      queries++
      await sleep(QUERY_MS)
      return got.map((key) => ({ key }))
    })
  } else {
    await Promise.all(
      keys.map((key) =>
        cache.getOrLoad(key, async () => {
          queries++
          await sleep(QUERY_MS)
          return { key }
        }),
      ),
    )
  }
  const ms = performance.now() - started
  const commands = sent() - before
  await cache.close()
  client.disconnect()
  return { ms, commands, queries }
}

const results: Record<'many' | 'single', Round[]> = { many: [], single: [] }
for (let r = 0; r < ROUNDS; r++) {
  // Alternating, so a noisy neighbour hurts both ways alike.
  results.many.push(await round('many', `m${r}`))
  results.single.push(await round('single', `s${r}`))
}
const load = (await import('node:os')).loadavg()[0]!.toFixed(1)
console.log(
  `${KEYS} keys, 900 in Redis, L1 off, query ${QUERY_MS} ms, median of ${ROUNDS} alternating rounds, load average ${load}`,
)
for (const way of ['many', 'single'] as const) {
  const rounds = results[way]
  const label = way === 'many' ? 'getOrLoadMany' : 'Promise.all(getOrLoad × 1,000)'
  console.log(
    `${label.padEnd(32)} ${median(rounds.map((r) => r.ms))
      .toFixed(1)
      .padStart(8)} ms` +
      `  ${String(median(rounds.map((r) => r.commands))).padStart(5)} commands` +
      `  ${String(median(rounds.map((r) => r.queries))).padStart(4)} queries`,
  )
}
await privateServer?.stop()
