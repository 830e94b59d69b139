/**
 * `npm run bench:hit`: what a cache hit costs, next to its baseline in the same run.
 * - L1 hit: no Redis command and no await inside the cache.
 * - Redis hit (L1 off) against `redis.get` + JSON.parse of the same value: throughput with
 *   one caller at a time, with 64 concurrent callers on distinct keys, and with 25 callers
 *   that each start every call from a macrotask of its own (as an HTTP server's requests
 *   do), and Redis CPU per hit from INFO commandstats (usec summed over every command one
 *   hit sends).
 * Each pair alternates for several rounds and keeps each side's best round, so a noisy
 * neighbour on a shared machine hurts both sides alike.
 * - The same rows instrumented (`instrument()` with a real MeterProvider and TracerProvider):
 *   what OpenTelemetry costs on each path.
 * - By value and format (values.ts): a small and a large value with jsonCodec, msgpackCodec
 *   and compression: Redis memory per value, bytes on the wire, and the cost of a hit.
 *   `BENCH_ONLY=values` runs that part alone.
 * Uses a private redis-server when REDIS_URL is unset.
 */
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { Redis } from 'ioredis'
import { createCache, type CacheOptions } from '../../src/index.js'
import { instrument, type InstrumentOptions } from '../../src/observability/index.js'
import { findRedisServer, startPrivateRedis } from '../shared/redis-server.js'
import { benchValues } from './values.js'
import { product } from '../shared/product.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const KEYS = 1_000
const CONCURRENCY = 64
/** Callers of the HTTP-like row: each call starts from its own macrotask, as each request of a server does. */
const HTTP_CALLERS = 25
const nextMacrotask = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Calls per second of `call(i)`, spread over `concurrency` loops (each loop gets its own i's), and this
 * process's CPU µs per call. `oneMacrotaskEach`: every call starts from a setImmediate, as the requests
 * of an HTTP server each start from their own socket event (what is batched within one tick is not).
 */
async function throughput(
  runs: number,
  call: (i: number) => Promise<unknown>,
  concurrency = 1,
  oneMacrotaskEach = false,
): Promise<{ perSecond: number; cpuUs: number }> {
  let next = 0
  const started = performance.now()
  const cpu = process.cpuUsage()
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < runs; i = next++) {
        if (oneMacrotaskEach) await nextMacrotask()
        await call(i)
      }
    }),
  )
  const used = process.cpuUsage(cpu)
  return { perSecond: runs / ((performance.now() - started) / 1000), cpuUs: (used.user + used.system) / runs }
}

/** Redis CPU (µs) per call of `call`, summed over the commands it sends (INFO commandstats). */
async function redisCpuPerCall(
  admin: Redis,
  runs: number,
  call: (i: number) => Promise<unknown>,
): Promise<{ usec: number; commands: string }> {
  await admin.config('RESETSTAT')
  for (let i = 0; i < runs; i++) await call(i)
  const info = await admin.info('commandstats')
  // A script's usec already includes the commands it calls (listed too): count only what was sent.
  const sent: [string, number, number][] = []
  const called: string[] = []
  for (const line of info.split('\n')) {
    const match = /^cmdstat_(\w+):calls=(\d+),usec=(\d+)/.exec(line.trim())
    if (!match || match[1] === 'config' || match[1] === 'info') continue
    sent.push([match[1]!, Number(match[2]), Number(match[3])])
  }
  const scripted = sent.some(([name]) => name.startsWith('eval'))
  let usec = 0
  const commands: string[] = []
  for (const [name, calls, spent] of sent) {
    const perHit = `${name}×${(calls / runs).toFixed(2)}`
    if (scripted && !name.startsWith('eval')) {
      called.push(perHit)
      continue
    }
    usec += spent
    commands.push(perHit)
  }
  return {
    usec: usec / runs,
    commands: commands.join(' + ') + (called.length ? `, calling ${called.join(' + ')}` : ''),
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US').padStart(10)

async function compare(
  label: string,
  runs: number,
  ours: (i: number) => Promise<unknown>,
  base: (i: number) => Promise<unknown>,
  concurrency: number,
  goal: number,
  oneMacrotaskEach = false,
): Promise<void> {
  const best = { ours: 0, base: 0, oursCpu: Infinity, baseCpu: Infinity }
  for (let round = 0; round < ROUNDS; round++) {
    const b = await throughput(runs, base, concurrency, oneMacrotaskEach)
    const o = await throughput(runs, ours, concurrency, oneMacrotaskEach)
    best.base = Math.max(best.base, b.perSecond)
    best.ours = Math.max(best.ours, o.perSecond)
    best.baseCpu = Math.min(best.baseCpu, b.cpuUs)
    best.oursCpu = Math.min(best.oursCpu, o.cpuUs)
  }
  const ratio = best.ours / best.base
  console.log(
    `${label.padEnd(46)} ${fmt(best.ours)} ops/s  vs GET+decode ${fmt(best.base)} ops/s ` +
      ` = ${ratio.toFixed(2)}×  (goal ≥ ${goal}×: ${ratio >= goal ? 'met' : 'NOT met'})`,
  )
  console.log(
    `${''.padEnd(46)} client CPU per call ${best.oursCpu.toFixed(1)} µs  vs GET+decode ${best.baseCpu.toFixed(1)} µs`,
  )
}

/**
 * Rows compared in interleaved rounds, by CPU time per call: on a busy machine wall-clock
 * rates drift between rows run one after another, and CPU time ignores time spent
 * descheduled. Prints the median over the rounds and the difference to the first row.
 */
async function compareInterleaved(
  rows: [label: string, call: () => Promise<unknown>][],
  rounds = 9,
  runs = 200_000,
): Promise<void> {
  const rates = rows.map((): number[] => [])
  for (let round = 0; round < rounds; round++) {
    for (const [index, [, call]] of rows.entries()) {
      const before = process.cpuUsage()
      for (let i = 0; i < runs; i++) await call()
      const used = process.cpuUsage(before)
      rates[index]!.push(runs / ((used.user + used.system) / 1e6))
    }
  }
  const medians = rates.map((list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!)
  for (const [index, [label]] of rows.entries()) {
    const change =
      index === 0 ? '' : `   ${((medians[index]! / medians[0]! - 1) * 100).toFixed(1).padStart(6)} % vs ${rows[0]![0]}`
    console.log(
      `${label.padEnd(44)} ${Math.round(medians[index]!).toLocaleString('en-US').padStart(12)} ops/CPU-s${change}`,
    )
  }
}

/** One row: calls per second of `call`, spread over `concurrency` loops, after a warm-up. */
async function timeIt(label: string, runs: number, call: () => Promise<unknown>, concurrency = 1): Promise<void> {
  for (let i = 0; i < Math.min(runs, 1_000); i++) await call() // warm-up
  const { perSecond } = await throughput(runs, call, concurrency)
  console.log(`${label.padEnd(46)} ${fmt(perSecond)} ops/s   ${(1e6 / perSecond).toFixed(2).padStart(8)} µs/op`)
}

const binary = findRedisServer()
if (!process.env.REDIS_URL && !binary) throw new Error('set REDIS_URL or install redis-server')
const privateRedis = process.env.REDIS_URL ? undefined : await startPrivateRedis()
const url = process.env.REDIS_URL ?? privateRedis!.url
const redis = new Redis(url)
const admin = new Redis(url)
if (process.env.BENCH_ONLY === 'values') {
  await benchValues(redis, admin)
  redis.disconnect()
  admin.disconnect()
  await privateRedis?.stop()
  process.exit(0)
}

const loader = async () => product(1)
const keyOf = (i: number) => `p${i % KEYS}`

const withL1 = createCache({ redis, ttl: '1h', namespace: 'bench-hit' })
const withoutL1 = createCache({ redis, ttl: '1h', namespace: 'bench-hit', l1: false })
const inProcess = createCache({ ttl: '1h' })
// clearable: the cache's own keys carry the cache-wide generation (a prefix built once per generation).
const clearable = createCache({ redis, ttl: '1h', namespace: 'bench-hit-clearable', clearable: true })
for (let i = 0; i < KEYS; i++) {
  await withoutL1.getOrLoad(keyOf(i), async () => product(i))
  await redis.set(`bench-get:${keyOf(i)}`, JSON.stringify(product(i)))
}
await withL1.getOrLoad('p0', loader)
await inProcess.getOrLoad('p0', loader)
await clearable.getOrLoad('p0', loader)

const hit = (i: number) => withoutL1.getOrLoad(keyOf(i), loader)
const getDecode = (i: number) => redis.get(`bench-get:${keyOf(i)}`).then((text) => JSON.parse(text!))
// Warm-up (JIT, connection), both sides.
await throughput(20_000, hit, CONCURRENCY)
await throughput(20_000, getDecode, CONCURRENCY)
const { loadavg } = await import('node:os')

console.log(
  `hit path on Node ${process.version}, redis at ${url}, value ${JSON.stringify(product(1)).length} ` +
    `bytes, best of ${ROUNDS} alternating rounds, load average ${loadavg()[0]!.toFixed(1)}`,
)
let started = performance.now()
for (let i = 0; i < 2_000_000; i++) await withL1.getOrLoad('p0', loader)
console.log(
  `${'L1 hit (Redis configured)'.padEnd(46)} ${fmt(2_000_000 / ((performance.now() - started) / 1000))} ops/s`,
)
started = performance.now()
for (let i = 0; i < 2_000_000; i++) await inProcess.getOrLoad('p0', loader)
console.log(`${'L1 hit (in-process mode)'.padEnd(46)} ${fmt(2_000_000 / ((performance.now() - started) / 1000))} ops/s`)
started = performance.now()
for (let i = 0; i < 2_000_000; i++) await clearable.getOrLoad('p0', loader)
console.log(`${'L1 hit (clearable: true)'.padEnd(46)} ${fmt(2_000_000 / ((performance.now() - started) / 1000))} ops/s`)

await compare('Redis hit, L1 off, 1 caller at a time', 10_000, hit, getDecode, 1, 0.9)
await compare(`Redis hit, L1 off, ${CONCURRENCY} callers, distinct keys`, 60_000, hit, getDecode, CONCURRENCY, 0.8)
await compare(
  `Redis hit, L1 off, ${HTTP_CALLERS} callers, one per macrotask`,
  40_000,
  hit,
  getDecode,
  HTTP_CALLERS,
  0.9,
  true,
)

const ours = await redisCpuPerCall(admin, 20_000, hit)
const get = await redisCpuPerCall(admin, 20_000, (i) => redis.get(`bench-get:${keyOf(i)}`))
const cpuRatio = ours.usec / get.usec
console.log(
  `Redis CPU per fresh hit: ${ours.usec.toFixed(2)} µs (${ours.commands})  vs GET ${get.usec.toFixed(2)} ` +
    `µs (${get.commands})  = ${cpuRatio.toFixed(2)}×  (goal ≤ 2×: ${cpuRatio <= 2 ? 'met' : 'NOT met'})`,
)

await benchValues(redis, admin)

// Instrumented twins, created only now so the rows above run exactly as they would without
// them. The Prometheus exporter is the metric reader (it collects only when scraped); spans
// are kept in memory (a hit opens none).
const meterProvider = new MeterProvider({ readers: [new PrometheusExporter({ preventServerStart: true })] })
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())],
})
let twins = 0
const instrumented = async (options: Partial<CacheOptions>, otel: InstrumentOptions = {}) => {
  const cache = createCache({ redis, ttl: '1h', namespace: 'bench-hit', ...options })
  instrument(cache, {
    meter: meterProvider.getMeter('bench'),
    tracer: tracerProvider.getTracer('bench'),
    name: `twin-${twins++}`,
    ...otel,
  })
  await cache.getOrLoad('k', loader)
  return cache
}
const withL1Otel = await instrumented({})
const withL1OtelLabel = await instrumented({}, { keyLabel: (key) => key.slice(0, 1) })
const inProcessOtel = await instrumented({ redis: undefined })
const withoutL1Otel = await instrumented({ l1: false })
console.log('instrumented: instrument(cache, { meter, tracer }) with the OTel SDKs')
await timeIt('L1 hit (Redis configured), instrumented', 2_000_000, () => withL1Otel.getOrLoad('k', loader))
await timeIt('L1 hit (Redis configured), + keyLabel', 2_000_000, () => withL1OtelLabel.getOrLoad('k', loader))
await timeIt('L1 hit (in-process mode), instrumented', 2_000_000, () => inProcessOtel.getOrLoad('k', loader))
await timeIt('Redis hit, L1 off, 1 at a time, instrumented', 20_000, () => withoutL1Otel.getOrLoad('k', loader))
// The first row again, in the same process state: tells the cost of instrumenting apart from drift.
await timeIt('L1 hit (Redis configured), not instrumented', 2_000_000, () => withL1.getOrLoad('k', loader))
console.log('L1 hit, instrumentation off and on, interleaved rounds (median of 9, CPU time)')
await compareInterleaved([
  ['L1 hit, not instrumented', () => withL1.getOrLoad('k', loader)],
  ['L1 hit, instrumented', () => withL1Otel.getOrLoad('k', loader)],
  ['L1 hit, instrumented + keyLabel', () => withL1OtelLabel.getOrLoad('k', loader)],
])

await Promise.all([
  withL1.close(),
  withoutL1.close(),
  inProcess.close(),
  clearable.close(),
  withL1Otel.close(),
  withL1OtelLabel.close(),
  inProcessOtel.close(),
  withoutL1Otel.close(),
])
await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()])
redis.disconnect()
admin.disconnect()
await privateRedis?.stop()
