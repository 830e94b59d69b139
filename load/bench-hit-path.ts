/**
 * `npm run bench:hit`: what a cache hit costs.
 * - L1 hit: no Redis command and no await inside the cache, so millions per second.
 * - Redis hit (L1 off): exactly one script call; the figure is one loopback round trip.
 * - The same, instrumented (`instrument()` with a real MeterProvider and TracerProvider):
 *   what OpenTelemetry costs on each path.
 * Uses a private redis-server when REDIS_URL is unset.
 */
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { Redis } from 'ioredis'
import { createCache, type CacheOptions } from '../src/index.js'
import { instrument, type InstrumentOptions } from '../src/observability/index.js'
import { findRedisServer, startPrivateRedis } from './redis-server.js'

async function timeIt(label: string, runs: number, call: () => Promise<unknown>, concurrency = 1): Promise<void> {
  for (let i = 0; i < Math.min(runs, 1_000); i++) await call() // warm-up
  const started = performance.now()
  let left = runs
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (left-- > 0) await call()
  }))
  const elapsed = performance.now() - started
  const perCall = (elapsed * 1000) / runs
  console.log(`${label.padEnd(44)} ${Math.round(runs / (elapsed / 1000)).toLocaleString('en-US').padStart(12)} ops/s   ${perCall.toFixed(2).padStart(8)} µs/op`)
}

/**
 * Rows compared in interleaved rounds, by CPU time per call: on a busy machine wall-clock
 * rates drift between rows run one after another, and CPU time ignores time spent
 * descheduled. Prints the median over the rounds and the difference to the first row.
 */
async function compareInterleaved(rows: [label: string, call: () => Promise<unknown>][], rounds = 9, runs = 200_000): Promise<void> {
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
    const change = index === 0 ? '' : `   ${((medians[index]! / medians[0]! - 1) * 100).toFixed(1).padStart(6)} % vs ${rows[0]![0]}`
    console.log(`${label.padEnd(44)} ${Math.round(medians[index]!).toLocaleString('en-US').padStart(12)} ops/CPU-s${change}`)
  }
}

const binary = findRedisServer()
if (!process.env.REDIS_URL && !binary) throw new Error('set REDIS_URL or install redis-server')
const privateRedis = process.env.REDIS_URL ? undefined : await startPrivateRedis(binary!)
const url = process.env.REDIS_URL ?? privateRedis!.url
const redis = new Redis(url)
const loader = async () => ({ id: 1, name: 'widget', price: 9.99 })

const withL1 = createCache({ redis, ttl: '1h', namespace: 'bench-hit' })
const withoutL1 = createCache({ redis, ttl: '1h', namespace: 'bench-hit', l1: false })
const inProcess = createCache({ ttl: '1h' })
await withL1.getOrLoad('k', loader)
await inProcess.getOrLoad('k', loader)

console.log(`hit path on Node ${process.version}, redis at ${url}`)
await timeIt('L1 hit (Redis configured)', 2_000_000, () => withL1.getOrLoad('k', loader))
await timeIt('L1 hit (in-process mode)', 2_000_000, () => inProcess.getOrLoad('k', loader))
await timeIt('Redis hit, L1 off, 1 caller at a time', 20_000, () => withoutL1.getOrLoad('k', loader))
await timeIt('Redis hit, L1 off, 50 concurrent (1 flight)', 100_000, () => withoutL1.getOrLoad('k', loader), 50)
await timeIt('baseline: redis.get, 1 at a time', 20_000, () => redis.get('bench-hit:baseline'))

// Instrumented twins, created only now so the rows above run exactly as they would without
// them. The Prometheus exporter is the metric reader (it collects only when scraped); spans
// are kept in memory (a hit opens none).
const meterProvider = new MeterProvider({ readers: [new PrometheusExporter({ preventServerStart: true })] })
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())] })
let twins = 0
const instrumented = async (options: Partial<CacheOptions>, otel: InstrumentOptions = {}) => {
  const cache = createCache({ redis, ttl: '1h', namespace: 'bench-hit', ...options })
  instrument(cache, { meter: meterProvider.getMeter('bench'), tracer: tracerProvider.getTracer('bench'), name: `twin-${twins++}`, ...otel })
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

await Promise.all([withL1.close(), withoutL1.close(), inProcess.close(), withL1Otel.close(), withL1OtelLabel.close(), inProcessOtel.close(), withoutL1Otel.close()])
await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()])
redis.disconnect()
await privateRedis?.stop()
