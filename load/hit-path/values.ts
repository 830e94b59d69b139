/**
 * The hit path by value and format, for `npm run bench:hit`: for a small and a large value,
 * stored with jsonCodec, msgpackCodec and with compression, what one value costs in Redis
 * (MEMORY USAGE of its fresh copy and of its hash, which holds a second copy), what a hit
 * moves on the wire (the fresh copy's length: the GET reply's payload), and what a hit costs
 * (L1 off, one caller at a time: hits per second and client CPU per hit, the best of
 * alternating rounds, and Redis CPU per hit from INFO commandstats).
 */
import type { Redis } from 'ioredis'
import { createCache, jsonCodec, msgpackCodec, type Cache, type CacheOptions } from '../../src/index.js'

const KEYS = 200
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)

/** A query result of `count` rows, ~145 bytes of JSON each. */
function rows(count: number) {
  return Array.from({ length: count }, (_, id) => ({
    id,
    name: `user ${id}`,
    email: `user${id}@example.com`,
    createdAt: new Date(1_767_323_045_678 + id * 1000).toISOString(),
    score: (id * 7919) % 10_007,
    active: id % 3 === 0,
  }))
}

interface Variant {
  label: string
  options: Partial<CacheOptions>
  value: (i: number) => unknown
}

const fmt = (n: number, width = 9) => Math.round(n).toLocaleString('en-US').padStart(width)

async function hitsPerSecond(call: (i: number) => Promise<unknown>, runs: number) {
  const started = performance.now()
  const cpu = process.cpuUsage()
  for (let i = 0; i < runs; i++) await call(i)
  const used = process.cpuUsage(cpu)
  return { perSecond: runs / ((performance.now() - started) / 1000), cpuUs: (used.user + used.system) / runs }
}

async function redisUsecPerCall(admin: Redis, call: (i: number) => Promise<unknown>, runs: number) {
  await admin.config('RESETSTAT')
  for (let i = 0; i < runs; i++) await call(i)
  let usec = 0
  for (const line of (await admin.info('commandstats')).split('\n')) {
    const match = /^cmdstat_(\w+):calls=\d+,usec=(\d+)/.exec(line.trim())
    if (match && match[1] !== 'config' && match[1] !== 'info') usec += Number(match[2])
  }
  return usec / runs
}

export async function benchValues(redis: Redis, admin: Redis): Promise<void> {
  const small = (i: number) => ({ id: i, name: `widget ${i}`, price: 9.99, tags: ['blue', 'small'], stock: 42 })
  const large = (i: number) => ({ page: i, rows: rows(400) })
  const msgpack = msgpackCodec()
  const variants: Variant[] = [
    { label: 'small, jsonCodec', options: { codec: jsonCodec }, value: small },
    { label: 'small, msgpackCodec', options: { codec: msgpack }, value: small },
    { label: 'large, jsonCodec', options: { codec: jsonCodec }, value: large },
    { label: 'large, msgpackCodec', options: { codec: msgpack }, value: large },
    { label: 'large, jsonCodec + brotli (q4)', options: { compression: true }, value: large },
    { label: 'large, jsonCodec + gzip (6)', options: { compression: { algorithm: 'gzip' } }, value: large },
    { label: 'large, msgpackCodec + brotli (q4)', options: { codec: msgpack, compression: true }, value: large },
  ]
  console.log(
    `values: small ${JSON.stringify(small(1)).length} B and large ${JSON.stringify(large(1)).length} B of JSON; ` +
      `Redis hit, L1 off, 1 caller at a time, best of ${ROUNDS} alternating rounds`,
  )
  const caches: [Variant, Cache, string][] = []
  for (const [index, variant] of variants.entries()) {
    const namespace = `bench-values-${index}`
    const cache = createCache({ redis, ttl: '1h', namespace, l1: false, ...variant.options })
    for (let i = 0; i < KEYS; i++) await cache.getOrLoad(`k${i}`, async () => variant.value(i))
    caches.push([variant, cache, namespace])
  }
  const best = caches.map(() => ({ perSecond: 0, cpuUs: Infinity }))
  for (let round = 0; round < ROUNDS; round++) {
    for (const [index, [variant, cache]] of caches.entries()) {
      const runs = variant.value === small ? 4_000 : 1_000
      const measured = await hitsPerSecond((i) => cache.getOrLoad(`k${i % KEYS}`, async () => variant.value(i)), runs)
      best[index]!.perSecond = Math.max(best[index]!.perSecond, measured.perSecond)
      best[index]!.cpuUs = Math.min(best[index]!.cpuUs, measured.cpuUs)
    }
  }
  for (const [index, [variant, cache, namespace]] of caches.entries()) {
    const fresh = `${namespace}:{k:k7}:v`
    const wire = await admin.strlen(fresh)
    const memory = Number(await admin.call('MEMORY', 'USAGE', fresh, 'SAMPLES', '0'))
    const hash = Number(await admin.call('MEMORY', 'USAGE', `${namespace}:{k:k7}`, 'SAMPLES', '0'))
    const redisUs = await redisUsecPerCall(admin, (i) => cache.getOrLoad(`k${i % KEYS}`, async () => 0), 500)
    console.log(
      `${variant.label.padEnd(34)} wire ${fmt(wire, 7)} B  Redis memory ${fmt(memory + hash, 7)} B ` +
        `(fresh copy ${fmt(memory, 6)} + hash ${fmt(hash, 6)})  ${fmt(best[index]!.perSecond, 7)} hits/s  ` +
        `client CPU ${best[index]!.cpuUs.toFixed(1).padStart(6)} µs  Redis CPU ${redisUs.toFixed(2).padStart(5)} µs per hit`,
    )
  }
  await Promise.all(caches.map(([, cache]) => cache.close()))
}
