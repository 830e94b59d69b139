// Run by scripts/consumer-check.sh in the throwaway project, as ESM, against the redis-server
// the script started (REDIS_URL): a row with a Date, loaded twice through the installed package.
import { Redis } from 'ioredis'
import { createCache } from 'stampede-guard'

const redis = new Redis(process.env.REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })
await redis.connect()
const cache = createCache({ redis, ttl: '1m', l1: false })
let loads = 0
const load = async () => {
  loads++
  return { id: 1, updatedAt: new Date('2026-01-02T03:04:05.678Z') }
}
const first = await cache.getOrLoad('row:1', load)
const second = await cache.getOrLoad('row:1', load)
const stored = await redis.keys('*')
await cache.close()
redis.disconnect()
const ok = loads === 1 && second.updatedAt instanceof Date && second.updatedAt.getTime() === first.updatedAt.getTime()
console.log(
  `ESM: 2 getOrLoad calls → ${loads} load(s); second answer's updatedAt is ${second.updatedAt instanceof Date ? 'a Date' : typeof second.updatedAt} (${second.updatedAt.toISOString?.() ?? second.updatedAt}); ${stored.length} key(s) in Redis`,
)
if (!ok) process.exit(1)
