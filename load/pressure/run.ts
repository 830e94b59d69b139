/**
 * `npm run bench:pressure`: what a burst costs a process, counted.
 * - hit burst: CALLS concurrent calls over KEYS keys that Redis already holds, from a
 *   process with an empty L1. Every call should be a hit: loaders run, `redis-error`
 *   events and breaker openings should all be 0. The heap per in-flight hit (all CALLS
 *   dispatched, none answered yet) must stay within HEAP_PER_HIT_BUDGET: exit code 1 past it.
 * - joined callers: JOINED callers on one flight, each with softTimeout, hardTimeout and
 *   waitTimeout. Counts the timers in flight (setTimeout is wrapped to count them) and
 *   the heap per caller.
 * - refresh cohort: COHORT keys loaded together with XFetch early refresh and grace, read
 *   in a loop for about one ttl: the most background refreshes at once, and how many
 *   keys refreshed once, or more than once.
 * Uses a private redis-server when REDIS_URL is unset. Sizes: `-- --calls 100000 --keys 20000`.
 */
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import { findRedisServer, startPrivateRedis } from '../shared/redis-server.js'

function arg(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 ? Number(process.argv[at + 1]) : fallback
}
const CALLS = arg('calls', 100_000)
const KEYS = arg('keys', 20_000)
const JOINED = arg('joined', 100_000)
const COHORT = arg('cohort', 2_000)
/**
 * Heap per in-flight Redis hit must not grow: 2.8 KB measured when it was first counted
 * (100,000 hits over 20,000 keys), with room for GC noise between runs. Past it the run
 * exits with code 1.
 */
const HEAP_PER_HIT_BUDGET = 3_500

// Every timer the cache arms, live until it fires or is cleared (unref'd ones included,
// which process.getActiveResourcesInfo() leaves out).
const liveTimers = new Set<unknown>()
const { setTimeout: realSetTimeout, clearTimeout: realClearTimeout } = globalThis
globalThis.setTimeout = ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
  const timer = realSetTimeout(
    (...a: unknown[]) => {
      liveTimers.delete(timer)
      callback(...a)
    },
    ms,
    ...args,
  )
  liveTimers.add(timer)
  return timer
}) as typeof setTimeout
globalThis.clearTimeout = ((timer: Parameters<typeof clearTimeout>[0]) => {
  liveTimers.delete(timer)
  realClearTimeout(timer)
}) as typeof clearTimeout
const timersInFlight = () => liveTimers.size
const round = (n: number) => Math.round(n).toLocaleString('en-US')

const binary = findRedisServer()
if (!process.env.REDIS_URL && !binary) throw new Error('set REDIS_URL or install redis-server')
const privateRedis = process.env.REDIS_URL ? undefined : await startPrivateRedis()
const url = process.env.REDIS_URL ?? privateRedis!.url
console.log(`bench:pressure on Node ${process.version}, redis at ${url}`)

async function hitBurst(): Promise<void> {
  const namespace = `bench-pressure-${Date.now()}`
  const seeding = new Redis(url)
  const seeder = createCache({ redis: seeding, ttl: '1h', namespace, l1: false })
  for (let from = 0; from < KEYS; from += 500) {
    await Promise.all(
      Array.from({ length: Math.min(500, KEYS - from) }, (_, i) =>
        seeder.set(`item:${from + i}`, { id: from + i, name: 'widget', price: 9.99 }),
      ),
    )
  }
  await seeder.close()
  seeding.disconnect()

  const redis = new Redis(url)
  const inFlight = arg('in-flight', 0) // 0: the default budget (and what code without one does)
  const cache = createCache({
    redis,
    ttl: '1h',
    namespace,
    l1: false,
    ...(inFlight ? { redisCommands: { maxInFlight: inFlight } } : {}),
  })
  let loads = 0
  const loader = async () => (loads++, { id: -1 })
  await cache.getOrLoad('item:0', loader) // connected and scripts loaded
  const before = cache.stats()
  globalThis.gc?.()
  const heapBefore = process.memoryUsage().heapUsed
  const started = performance.now()
  const calls = Array.from({ length: CALLS }, (_, i) => cache.getOrLoad(`item:${i % KEYS}`, loader))
  const timersAfterDispatch = timersInFlight()
  const dispatched = performance.now() - started
  // Every call is in flight now (no reply is read before this turn of the loop ends): what they hold.
  globalThis.gc?.()
  const heapPerHit = (process.memoryUsage().heapUsed - heapBefore) / CALLS
  await Promise.all(calls)
  const elapsed = performance.now() - started
  const after = cache.stats()
  console.log(`hit burst: ${round(CALLS)} concurrent calls over ${round(KEYS)} stored keys, L1 off`)
  console.log(
    `  loader runs ${loads}, redis-error ${after['redis-error'] - before['redis-error']}, circuit-open ${after['circuit-open'] - before['circuit-open']}, ` +
      `waitTimeouts of joined callers ${after.timeout - before.timeout}, ` +
      `redis hits ${round(after.hit - before.hit)}, timers right after dispatch ${round(timersAfterDispatch)}, ` +
      `dispatch ${round(dispatched)} ms, all answered ${round(elapsed)} ms`,
  )
  const overBudget = heapPerHit > HEAP_PER_HIT_BUDGET
  console.log(
    `  heap per in-flight Redis hit ${round(heapPerHit)} B${globalThis.gc ? '' : ' (no --expose-gc: rough)'} ` +
      `(budget ${round(HEAP_PER_HIT_BUDGET)} B: ${overBudget ? 'OVER, exit code 1' : 'within'})`,
  )
  if (overBudget) process.exitCode = 1
  await cache.close()
  redis.disconnect()
}

async function joinedCallers(): Promise<void> {
  const cache = createCache({ ttl: '1h', softTimeout: '1m', hardTimeout: '2m', waitTimeout: '3m' })
  let release: () => void = () => {}
  const held = new Promise<void>((resolve) => (release = resolve))
  const loader = async () => (await held, 'value')
  const timersBefore = timersInFlight()
  globalThis.gc?.()
  const heapBefore = process.memoryUsage().heapUsed
  const calls = Array.from({ length: JOINED }, () => cache.getOrLoad('hot', loader))
  await new Promise((resolve) => setImmediate(resolve))
  const timers = timersInFlight() - timersBefore
  globalThis.gc?.()
  const heapPerCall = (process.memoryUsage().heapUsed - heapBefore) / JOINED
  release()
  await Promise.all(calls)
  console.log(`joined callers: ${round(JOINED)} callers on 1 flight with softTimeout, hardTimeout, waitTimeout`)
  console.log(
    `  timers in flight ${round(timers)}, heap ${round(heapPerCall)} B per caller${globalThis.gc ? '' : ' (no --expose-gc: rough)'}`,
  )
  await cache.close()
}

async function refreshCohort(): Promise<void> {
  const redis = new Redis(url)
  const namespace = `bench-cohort-${Date.now()}`
  const cache = createCache({ redis, ttl: 3_000, staleTtl: '10s', namespace, earlyRefresh: 'xfetch' })
  let running = 0
  let peak = 0
  let refreshes = 0
  let foreground = 0
  const refreshesOf = new Map<string, number>()
  const loader = async (context: { background: boolean; key: string }) => {
    if (!context.background) foreground++
    if (context.background) {
      refreshesOf.set(context.key, (refreshesOf.get(context.key) ?? 0) + 1)
      refreshes++
      running++
      peak = Math.max(peak, running)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
    if (context.background) running--
    return 'v'
  }
  const keys = Array.from({ length: COHORT }, (_, i) => `cohort:${i}`)
  await Promise.all(keys.map((key) => cache.getOrLoad(key, loader)))
  foreground = 0
  const until = performance.now() + 3_500
  while (performance.now() < until) {
    for (const key of keys) void cache.getOrLoad(key, loader)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  await cache.close()
  const refreshed = keys.filter((key) => (refreshesOf.get(key) ?? 0) > 0).length
  const twice = keys.filter((key) => (refreshesOf.get(key) ?? 0) > 1).length
  console.log(
    `refresh cohort: ${round(COHORT)} keys loaded together, ttl 3 s + 10 s grace, XFetch, 50 ms loads, read every 20 ms for 3.5 s`,
  )
  console.log(
    `  background refreshes ${round(refreshes)} (keys refreshed ${round(refreshed)}, twice or more ${round(twice)}), most at once ${round(peak)}, ` +
      `foreground loads ${round(foreground)}`,
  )
  redis.disconnect()
}

const only = process.argv.indexOf('--only') > 0 ? process.argv[process.argv.indexOf('--only') + 1] : undefined
if (!only || only === 'burst') await hitBurst()
if (!only || only === 'joined') await joinedCallers()
if (!only || only === 'cohort') await refreshCohort()
await privateRedis?.stop()
