/**
 * `npm run bench:miss`: what a miss costs the client and Redis, next to the seed spin lock in
 * the same run. Each miss is a distinct cold key whose loader answers at once, 16 at a time,
 * so nothing waits on a database: what is left is the miss path's own work (lookups, lock,
 * lease, encode, commit). Rounds alternate the two sides; each side keeps its best round (CPU
 * time is what a shared machine distorts least). Redis usec per miss is INFO commandstats'
 * usec of the commands the client sent (a script's own calls are inside its usec): it is the
 * time between a command's start and end, so it grows when the server is descheduled in the
 * middle of a long script. redis-server CPU per miss is the process's own CPU time (INFO cpu),
 * reading, parsing and replying included: what a loaded machine distorts least.
 * Uses a private redis-server when REDIS_URL is unset.
 */
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import { SpinLockCache } from '../wakeup/spin-lock-cache.js'
import { findRedisServer, startPrivateRedis } from '../shared/redis-server.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const MISSES = 4_000
const CONCURRENCY = 16

const binary = findRedisServer()
if (!process.env.REDIS_URL && !binary) throw new Error('set REDIS_URL or install redis-server')
const privateRedis = process.env.REDIS_URL ? undefined : await startPrivateRedis()
const url = process.env.REDIS_URL ?? privateRedis!.url
const redis = new Redis(url)
const admin = new Redis(url)
const item = (id: number) => ({ id, name: `Item ${id}`, priceCents: 100 + id, loadedAt: Date.now() })

/** Commands the benchmark's client sent since the round began, by name (EVALSHA/EVAL as such). */
const sent = new Map<string, number>()
const send = redis.sendCommand.bind(redis)
redis.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
  const name = command.name.toLowerCase()
  sent.set(name, (sent.get(name) ?? 0) + 1)
  return (send as (...a: unknown[]) => unknown)(command, ...rest)
}) as typeof redis.sendCommand

const cache = createCache({ redis, ttl: '1h', namespace: `bench-miss-${process.pid}`, l1: false })
await cache.ready()
const spin = new SpinLockCache(redis, 3_600_000)
let next = 0
const sides = {
  'stampede-guard (lock, no L1)': (key: string) => cache.getOrLoad(key, async () => item(1)),
  'spin lock': (key: string) => spin.getOrLoad(`bench-miss-${process.pid}:${key}`, async () => item(1)),
} as const
type Side = keyof typeof sides

/** The redis-server process's CPU seconds (user + system): unlike commandstats' usec, not inflated when it is descheduled mid-command. */
async function redisCpuSeconds(): Promise<number> {
  const info = await admin.info('cpu')
  return Number(/used_cpu_user:([\d.]+)/.exec(info)![1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)![1])
}

type Measure = { cpu: number; wall: number; redisUs: number; redisCpu: number; commands: number }

/** CPU µs, wall µs, Redis commandstats µs and Redis process CPU µs per miss of one round. */
async function round(side: Side): Promise<Measure> {
  await admin.config('RESETSTAT')
  const redisCpu = await redisCpuSeconds()
  sent.clear()
  const miss = sides[side]
  const cpu = process.cpuUsage()
  const started = performance.now()
  let left = MISSES
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (left-- > 0) await miss(`k${next++}`)
    }),
  )
  const used = process.cpuUsage(cpu)
  const wall = performance.now() - started
  const redisCpuUsed = (await redisCpuSeconds()) - redisCpu
  // A command a script called is in the server's counts too, and its time in the script's:
  // count each command's share that the client sent itself.
  let usec = 0
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    const own = sent.get(m[1]!) ?? 0
    if (own > 0) usec += (Number(m[3]) * Math.min(own, Number(m[2]))) / Number(m[2])
  }
  const commands = [...sent.values()].reduce((a, b) => a + b, 0)
  sent.clear()
  return {
    cpu: (used.user + used.system) / MISSES,
    wall: (wall * 1000) / MISSES,
    redisUs: usec / MISSES,
    // The admin connection's own INFO commands are in it too (2 per round, a few µs each: noise).
    redisCpu: (redisCpuUsed * 1e6) / MISSES,
    commands: commands / MISSES,
  }
}

const none = (): Measure => ({ cpu: Infinity, wall: Infinity, redisUs: Infinity, redisCpu: Infinity, commands: 0 })
const best: Record<Side, Measure> = { 'stampede-guard (lock, no L1)': none(), 'spin lock': none() }
for (const side of Object.keys(sides) as Side[]) await round(side) // warm-up (JIT, scripts)
for (let r = 0; r < ROUNDS; r++) {
  for (const side of (r % 2 ? ['spin lock', 'stampede-guard (lock, no L1)'] : Object.keys(sides)) as Side[]) {
    const m = await round(side)
    const b = best[side]
    b.cpu = Math.min(b.cpu, m.cpu)
    b.wall = Math.min(b.wall, m.wall)
    b.redisUs = Math.min(b.redisUs, m.redisUs)
    b.redisCpu = Math.min(b.redisCpu, m.redisCpu)
    b.commands = m.commands
  }
}
const { loadavg } = await import('node:os')
console.log(
  `miss path on Node ${process.version}: ${MISSES} distinct cold keys, ${CONCURRENCY} at a time, loader answers at once, ` +
    `best of ${ROUNDS} alternating rounds, load average ${loadavg()[0]!.toFixed(1)}`,
)
for (const [side, b] of Object.entries(best))
  console.log(
    `${side.padEnd(30)} client CPU ${b.cpu.toFixed(1).padStart(6)} µs/miss   wall ${b.wall.toFixed(1).padStart(6)} µs/miss` +
      `   Redis usec ${b.redisUs.toFixed(1).padStart(5)} µs/miss over ${b.commands.toFixed(2)} commands` +
      `   redis-server CPU ${b.redisCpu.toFixed(1).padStart(5)} µs/miss`,
  )
await cache.close()
redis.disconnect()
admin.disconnect()
await privateRedis?.stop()
