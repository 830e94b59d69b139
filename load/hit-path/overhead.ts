/**
 * `npx tsx load/hit-path/overhead.ts`: the cache's own CPU per Redis hit (L1 off, one caller at a
 * time), with the socket taken out. `npm run bench:hit` compares a hit with a bare GET +
 * JSON.parse, but on a shared machine most of either side's CPU is the socket write and read
 * (about 25 µs against a few µs of cache work), so that ratio swings with the neighbours.
 * Here the client's `getBuffer` answers from a copy of the stored fresh copies, so what is left
 * is the cache's work (call, single-flight, budget, in-flight list, record and value decoding,
 * promise hops) against `Promise.resolve(text).then(JSON.parse)`. Median of 9 alternating
 * rounds of CPU time. Uses a private redis-server (to store the copies) when REDIS_URL is unset.
 */
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import { startPrivateRedis } from '../shared/redis-server.js'
import { product } from '../shared/product.js'

const KEYS = 100
const RUNS = 200_000
const ROUNDS = 9

const privateRedis = process.env.REDIS_URL ? undefined : await startPrivateRedis()
const redis = new Redis(process.env.REDIS_URL ?? privateRedis!.url)
const namespace = `bench-overhead-${process.pid}`
const cache = createCache({ redis, ttl: '1h', namespace, l1: false })
for (let i = 0; i < KEYS; i++) await cache.getOrLoad(`p${i}`, async () => product(i))
const stored = new Map<string, Buffer>()
for (const key of await redis.keys(`${namespace}:*:v`)) stored.set(key, (await redis.getBuffer(key))!)
if (stored.size !== KEYS) throw new Error(`expected ${KEYS} fresh copies, found ${stored.size}`)
const texts = Array.from({ length: KEYS }, (_, i) => JSON.stringify(product(i)))
// From here on a fresh read is answered without the socket (the clock and everything else stay real).
;(redis as unknown as { getBuffer: (key: string) => Promise<Buffer | null> }).getBuffer = (key) =>
  Promise.resolve(stored.get(key) ?? null)

const loader = async () => product(0)
const sides = {
  ours: (i: number) => cache.getOrLoad(`p${i % KEYS}`, loader),
  base: (i: number) => Promise.resolve(texts[i % KEYS]!).then(JSON.parse),
}
const cpu: Record<keyof typeof sides, number[]> = { ours: [], base: [] }
for (let round = 0; round < ROUNDS; round++) {
  for (const side of ['base', 'ours'] as const) {
    const before = process.cpuUsage()
    for (let i = 0; i < RUNS; i++) await sides[side](i)
    const used = process.cpuUsage(before)
    cpu[side].push((used.user + used.system) / RUNS)
  }
}
const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!
const [ours, base] = [median(cpu.ours), median(cpu.base)]
const { loadavg } = await import('node:os')
console.log(
  `Redis hit without the socket, L1 off, 1 caller at a time: cache ${ours.toFixed(2)} µs CPU per hit ` +
    `vs Promise + JSON.parse ${base.toFixed(2)} µs: the cache's own work ${(ours - base).toFixed(2)} µs ` +
    `(median of ${ROUNDS} rounds of ${RUNS.toLocaleString('en-US')}, load average ${loadavg()[0]!.toFixed(1)})`,
)
await cache.close()
redis.disconnect()
await privateRedis?.stop()
