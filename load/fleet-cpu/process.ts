/**
 * One process of `npm run bench:fleet-cpu`: a cache as the zipf scenario configures `full`
 * (over Redis at BENCH_REDIS_URL, or in-process when it is empty; or, with BENCH_CACHE=spinlock,
 * the seed's spin lock over that Redis), called by `loops`
 * concurrent loops on Zipf-distributed keys, each pausing `gapMs` between calls, with a 50 ms
 * loader. Reports its calls, loads, CPU (all threads, and the main thread alone) and the
 * Redis commands it sent.
 */
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { createCache } from '../../src/index.js'
import { SpinLockCache } from '../wakeup/spin-lock-cache.js'
import { zipfSampler } from '../stampede/zipf.js'
import type { FleetChildToParent, FleetParentToChild } from './protocol.js'

const send = (m: FleetChildToParent) => process.send?.(m)
const url = process.env.BENCH_REDIS_URL
const redis = url ? new Redis(url) : undefined
const commands: Record<string, number> = {}
if (redis) {
  const sendCommand = redis.sendCommand.bind(redis)
  redis.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
    commands[command.name] = (commands[command.name] ?? 0) + 1
    return (sendCommand as (...a: unknown[]) => unknown)(command, ...rest)
  }) as typeof redis.sendCommand
}
const options = { namespace: process.env.BENCH_NAMESPACE!, ttl: 2_000, staleTtl: 10_000, staleIfError: 10_000 }
// BENCH_CACHE=spinlock: the seed's spin lock (a GET per call, no L1), the reference for what a
// Redis round trip per call costs at this rate.
const cache =
  process.env.BENCH_CACHE === 'spinlock' && redis
    ? new SpinLockCache(redis, options.ttl)
    : redis
      ? createCache({ ...options, redis, earlyRefresh: 'xfetch', l1: { max: 10_000 } })
      : createCache({ ...options, earlyRefresh: 'xfetch', l1: { max: 10_000 } })
const nextKey = zipfSampler(1_000, 1)

/** CPU time of this process's main thread (its task id is the pid), µs, from /proc. */
function mainThreadUs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12]) // utime + stime, in clock ticks
  return ticks * 10_000 // USER_HZ is 100 on Linux
}

process.on('message', async (m: FleetParentToChild) => {
  let calls = 0
  let loads = 0
  const until = Date.now() + m.warmUpMs + m.durationMs
  let cpuBefore = process.cpuUsage()
  let mainBefore = mainThreadUs()
  // Measured from the end of the warm-up: V8 has compiled the hot paths by then.
  setTimeout(() => {
    calls = 0
    loads = 0
    for (const name of Object.keys(commands)) delete commands[name]
    cpuBefore = process.cpuUsage()
    mainBefore = mainThreadUs()
  }, m.warmUpMs)
  await Promise.all(
    Array.from({ length: m.loops }, async () => {
      while (Date.now() < until) {
        const key = String(nextKey())
        await cache.getOrLoad(key, async () => {
          loads++
          await sleep(50)
          return { id: Number(key), name: `item ${key}`, priceCents: 100, loadedAt: Date.now() }
        })
        calls++
        await sleep(m.gapMs)
      }
    }),
  )
  const cpu = process.cpuUsage(cpuBefore)
  const mainUs = mainThreadUs() - mainBefore
  send({
    type: 'done',
    calls,
    loads,
    cpuUs: cpu.user + cpu.system,
    systemUs: cpu.system,
    mainThreadUs: mainUs,
    commands,
  })
  if ('close' in cache) await cache.close()
  redis?.disconnect()
  process.exit(0)
})
process.on('disconnect', () => process.exit(0))
send({ type: 'ready' })
