/**
 * `npm run bench:hit`: what a cache hit costs.
 * - L1 hit: no Redis command and no await inside the cache, so millions per second.
 * - Redis hit (L1 off): exactly one script call; the figure is one loopback round trip.
 * Uses a private redis-server when REDIS_URL is unset.
 */
import { Redis } from 'ioredis'
import { createCache } from '../src/index.js'
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

await Promise.all([withL1.close(), withoutL1.close(), inProcess.close()])
redis.disconnect()
await privateRedis?.stop()
