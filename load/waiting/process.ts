/**
 * A child of `npm run bench:waiting`: the holder (its loaders hold N locks until told) or
 * the waiter (asks for the same N keys and waits on the holder). Counts the commands it
 * sends, by name, by wrapping ioredis' `sendCommand` on the prototype, so the subscriber
 * connection the cache duplicates is counted too; a script call is named by its file.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { setFlagsFromString, writeHeapSnapshot } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Redis } from 'ioredis'
import { createCache, type CacheOptions } from '../../src/index.js'
import { cacheParts } from '../../src/cache/cache.js'
import { scriptFiles, scriptOf } from '../../test/support/script-calls.js'
import type { ChildToParent, ParentToChild } from './protocol.js'

const send = (m: ChildToParent) => process.send?.(m)
const role = process.env.BENCH_ROLE as 'holder' | 'waiter'
const options = JSON.parse(process.env.BENCH_CACHE_OPTIONS ?? '{}') as CacheOptions

const files = scriptFiles()
// A full collection before each heap reading, so the heap per pending wait is what waits hold.
setFlagsFromString('--expose-gc')
const collect = runInNewContext('gc') as () => void
const heapNow = () => (collect(), process.memoryUsage().heapUsed)
/** When each key's call returned, as epoch ms (one clock for both processes on one machine). */
const now = () => performance.timeOrigin + performance.now()

let commands: Record<string, number> = {}
/** Lookups (get-or-lock.lua) sent since start: the waiter reports it is waiting once they stop. */
let lookups = 0
type Sendable = { name: string; args: unknown[] }
const original = Redis.prototype.sendCommand
Redis.prototype.sendCommand = function (this: Redis, command: Sendable, ...rest: unknown[]) {
  let name = command.name.toLowerCase()
  const script = scriptOf(command, files)
  if (script) name = `script ${script}`
  if (script === 'get-or-lock.lua') lookups++
  if (name === 'subscribe' || name === 'ssubscribe') commands[name] = (commands[name] ?? 0) + command.args.length
  else commands[name] = (commands[name] ?? 0) + 1
  // Keys a script call is about: a batched one (extend-many, poll-locks) counts each of its locks.
  if (script) {
    const batched = /extend-many|poll-locks/.test(name)
    commands[`${name} keys`] = (commands[`${name} keys`] ?? 0) + (batched ? Number(command.args[1]) : 1)
  }
  return (original as (...a: unknown[]) => unknown).call(this, command, ...rest)
} as typeof Redis.prototype.sendCommand

const redis = new Redis(process.env.BENCH_REDIS_URL!)
redis.on('error', () => {})
// maxHold well past the run: a slow set-up on a busy machine must not end the holds it measures.
const cache = createCache({
  redis,
  namespace: process.env.BENCH_NAMESPACE!,
  ttl: '10m',
  l1: false,
  waitTimeout: '5m',
  ...options,
  lock: { maxHold: '10m', ...options.lock },
})
const loop = monitorEventLoopDelay({ resolution: 10 })
let windowStart = 0

let release: () => void = () => {}
const released = new Promise<void>((resolve) => (release = resolve))
let loads = 0
const lostReasons: Record<string, number> = {}
const phaseAt: Record<string, number> = {}
const since = (at: number) => Math.round(at - (phaseAt.start ?? 0))
cache.on('lock-lost', ({ reason }) => {
  lostReasons[reason] = (lostReasons[reason] ?? 0) + 1
  phaseAt.firstLoss ??= performance.now()
  phaseAt.lastLoss = performance.now()
})

/** Calls answered in the current turn, and the most in any turn. */
let answeredThisTurn = 0
let mostAnsweredInOneTurn = 0
function countAnswered(): void {
  if (answeredThisTurn++ > 0) return
  setImmediate(() => {
    mostAnsweredInOneTurn = Math.max(mostAnsweredInOneTurn, answeredThisTurn)
    answeredThisTurn = 0
  })
}

/**
 * The heap this harness itself holds per pending call (the `.catch().finally()` chain, the
 * slot in `Promise.all`, the array): the same calls on a promise that never settles, with
 * the key and the loader made and dropped as the real calls make them. Subtracted from the
 * reading so that "net" is what a pending wait costs inside the cache, key and loader included.
 */
async function harnessHeapPerCall(keys: number, prefix: string): Promise<number> {
  const before = heapNow()
  const calls = Array.from({ length: keys }, (_, i) => {
    void `${prefix}:${i}`
    void (async () => ({ i }))
    return new Promise<unknown>(() => {}).catch(() => 0).finally(() => undefined)
  })
  const all = Promise.all(calls)
  const perCall = (heapNow() - before) / keys
  void all
  return perCall
}

async function start(keys: number, prefix: string): Promise<void> {
  let settled = 0
  let errors = 0
  const key = (i: number) => `${prefix}:${i}`
  const answeredAt: number[] = new Array<number>(keys).fill(0)
  if (role === 'holder') {
    let running = 0
    const calls = Array.from({ length: keys }, (_, i) =>
      cache
        .getOrLoad(key(i), async () => {
          loads++
          if (++running === keys) send({ type: 'started', waiting: running, settled })
          await released
          return { i }
        })
        .catch(() => errors++)
        .finally(() => ((answeredAt[i] = now()), settled++)),
    )
    await Promise.all(calls)
  } else {
    let waiting = 0
    let told = false
    const tell = () => {
      if (told || waiting + settled < keys) return
      told = true
      // Every call has reached its wait; each still subscribes and re-checks once: report once
      // those lookups stopped (none for 500 ms, or after 30 s: code that polls with lookups never
      // stops), so the window sees waiting only.
      const giveUpAt = performance.now() + 30_000
      const settle = (seen: number) =>
        setTimeout(() => {
          if (lookups === seen || performance.now() > giveUpAt) {
            const heapPerWait = (heapNow() - heapBefore) / Math.max(1, waiting)
            const heapNetPerWait = heapPerWait - harnessPerCall
            // Where a pending wait's heap goes: BENCH_HEAP_SNAPSHOT=<dir> (open it in Chrome DevTools' Memory tab).
            const dir = process.env.BENCH_HEAP_SNAPSHOT
            if (dir) writeHeapSnapshot(`${dir}/waiter-${keys}.heapsnapshot`)
            send({ type: 'started', waiting, settled, heapPerWait, heapNetPerWait, loads, stats: { ...cache.stats() } })
          } else settle(lookups)
        }, 500)
      settle(lookups)
    }
    cache.on('wait', () => (waiting++, tell()))
    const harnessPerCall = await harnessHeapPerCall(keys, prefix)
    const heapBefore = heapNow()
    const calls = Array.from({ length: keys }, (_, i) =>
      cache
        .getOrLoad(key(i), async () => (loads++, { i, by: 'waiter' }))
        .catch(() => errors++)
        .finally(() => ((answeredAt[i] = now()), settled++, countAnswered(), tell())),
    )
    await Promise.all(calls)
  }
  if (phaseAt.firstLoss !== undefined) {
    lostReasons[
      `ms after start: first ${since(phaseAt.firstLoss)}, last ${since(phaseAt.lastLoss!)}, window ` +
        `${since(phaseAt.sample ?? 0)}–${since(phaseAt.report ?? 0)}, release ${since(phaseAt.release ?? 0)}`
    ] = 0
  }
  const perTurn = { answered: mostAnsweredInOneTurn, resumed: cacheParts(cache).core.wakeups.counts.mostInOneTurn }
  send({ type: 'done', loads, errors, stats: cache.stats(), lostReasons, answeredAt, perTurn })
}

process.on('message', (m: ParentToChild) => {
  const fail = (error: unknown) => send({ type: 'error', message: String((error as Error)?.stack ?? error) })
  phaseAt[m.type] = performance.now()
  if (m.type === 'start') start(m.keys, m.prefix).catch(fail)
  else if (m.type === 'sample') {
    commands = {}
    loop.reset()
    loop.enable()
    windowStart = performance.now()
  } else if (m.type === 'report') {
    loop.disable()
    send({
      type: 'sample',
      sample: {
        commands,
        windowMs: performance.now() - windowStart,
        loopP99Ms: loop.percentile(99) / 1e6,
        stats: cache.stats(),
      },
    })
  } else if (m.type === 'release') release()
  else if (m.type === 'exit') void cache.close().finally(() => (redis.disconnect(), process.exit(0)))
})
process.on('disconnect', () => process.exit(0))

await redis.ping()
await cache.ready()
send({ type: 'ready' })
