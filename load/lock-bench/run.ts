/**
 * `npm run bench:lock`: the distributed locks side by side, in one run, on the same
 * private redis-servers (and one etcd member and one ZooKeeper server, when installed):
 *
 * 1. acquire and release latency, uncontended (the cost a critical section pays twice);
 * 2. hand-off latency: this process holds a lock that a waiter in ANOTHER process is
 *    waiting for, releases it at t0, and the waiter's acquire resolves at t1. t1 − t0
 *    includes the release round trip: it is how long the lock sits idle between holders.
 *    The release comes 20–220 ms after the waiter started waiting, so it falls at a
 *    uniform point of a polling lock's retry cycle (a fair baseline).
 *
 * Clocks: both processes report performance.timeOrigin + performance.now(), on one host.
 * Contenders are in load/lock-bench/contenders.ts; add one there.
 */
import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { forkTs } from '../shared/fork-ts.js'
import { startConsensusServers } from './consensus-contenders.js'
import type { BenchEnv } from './contender.js'
import { BENCH_CONTENDERS } from './contenders.js'
import { measureContention } from './contention.js'
import type { FromWaiter, ToWaiter } from './protocol.js'
import { findRedisServer, startPrivateRedis, type PrivateRedis } from '../shared/redis-server.js'
import { bold, dim } from '../shared/format.js'
import { renderGrid } from '../shared/grid.js'

const { values: args } = parseArgs({
  options: {
    iterations: { type: 'string', default: '300' },
    rounds: { type: 'string', default: '60' },
    contenders: { type: 'string' },
    contention: { type: 'string', default: '4' },
    holds: { type: 'string', default: '25' },
  },
})
const ITERATIONS = Number(args.iterations)
const ROUNDS = Number(args.rounds)
const CONTENTION = Number(args.contention)
const HOLDS = Number(args.holds)
const now = () => performance.timeOrigin + performance.now()

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}

function nextMessage<T extends FromWaiter['type']>(
  child: ChildProcess,
  type: T,
  timeoutMs = 40_000,
): Promise<Extract<FromWaiter, { type: T }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', listener)
      reject(new Error(`waiter: no '${type}' within ${timeoutMs} ms`))
    }, timeoutMs)
    const listener = (message: FromWaiter) => {
      if (message.type === 'error') {
        clearTimeout(timer)
        child.off('message', listener)
        reject(new Error(`waiter: ${message.message}`))
      } else if (message.type === type) {
        clearTimeout(timer)
        child.off('message', listener)
        resolve(message as Extract<FromWaiter, { type: T }>)
      }
    }
    child.on('message', listener)
  })
}

async function main(): Promise<void> {
  const binary = findRedisServer()
  if (!binary) throw new Error('bench:lock needs redis-server on PATH (or REDIS_SERVER_BIN)')
  const servers: PrivateRedis[] = await Promise.all(Array.from({ length: 5 }, () => startPrivateRedis()))
  const consensus = await startConsensusServers()
  const env: BenchEnv = { redisUrls: servers.map((server) => server.url), ...consensus.env }
  const requested = args.contenders?.split(',').map((name) => name.trim())
  const contenders = BENCH_CONTENDERS.filter((c) => !requested || requested.includes(c.name))
  const childEnv = { BENCH_REDIS_URLS: env.redisUrls.join(','), ...consensus.waiterEnv }
  const waiter = forkTs(fileURLToPath(new URL('./waiter.ts', import.meta.url)), childEnv)
  const send = (message: ToWaiter) => waiter.send(message)
  const rows: string[][] = []
  try {
    await nextMessage(waiter, 'ready')
    console.log(bold('stampede-guard lock benchmark'))
    console.log(
      dim(
        `  ${ITERATIONS} uncontended acquire/release pairs and ${ROUNDS} cross-process hand-offs per lock; 5 private redis-servers`,
      ),
    )
    for (const contender of contenders) {
      const skip = contender.unavailable?.(env)
      if (skip) {
        console.log(dim(`  skipped ${contender.name}: ${skip}`))
        continue
      }
      console.log(dim(`  ${contender.name}: ${contender.describe}`))
      const lock = await contender.create(env)
      const acquireMs: number[] = []
      const releaseMs: number[] = []
      for (let i = -20; i < ITERATIONS; i++) {
        const startedAt = performance.now()
        const release = await lock.acquire('bench:latency', 1_000)
        const acquiredAt = performance.now()
        await release()
        if (i < 0) continue // warm-up: connections, script cache
        acquireMs.push(acquiredAt - startedAt)
        releaseMs.push(performance.now() - acquiredAt)
      }
      const handoffMs: number[] = []
      const slug = contender.name.replace(/[^a-z0-9]+/gi, '-')
      for (let round = 0; round < ROUNDS; round++) {
        const key = `bench:handoff:${slug}:${process.pid}:${round}`
        const release = await lock.acquire(key, 1_000)
        const waiting = nextMessage(waiter, 'waiting')
        send({ type: 'wait', contender: contender.name, key })
        await waiting
        await sleep(20 + Math.random() * 200)
        const acquired = nextMessage(waiter, 'acquired')
        const releasedAt = now()
        await release()
        handoffMs.push((await acquired).at - releasedAt)
        const released = nextMessage(waiter, 'released')
        send({ type: 'release', key })
        await released
      }
      await lock.close()
      // 3. Hand-off under contention: CONTENTION processes × HOLDS holds of 3–7 ms on one key (contention.ts).
      const contended = await measureContention(contender.name, childEnv, CONTENTION, HOLDS)
      if (contended.errors.length > 0)
        console.log(dim(`  ${contender.name} contention errors: ${contended.errors.join('; ')}`))
      console.log(
        dim(
          `  ${contender.name}: slowest hand-offs ${contended.slowest
            .map((h) => `${h.ms.toFixed(2)} ms (GC meanwhile ${h.gcMs.toFixed(2)} ms)`)
            .join(', ')}`,
        ),
      )
      if (contended.overlaps > 0) console.log(bold(`  ${contender.name}: ${contended.overlaps} OVERLAPPING holds`))
      const f = (n: number) => n.toFixed(2)
      rows.push([
        contender.name,
        f(quantile(acquireMs, 0.5)),
        f(quantile(acquireMs, 0.99)),
        f(quantile(releaseMs, 0.5)),
        f(quantile(releaseMs, 0.99)),
        f(quantile(handoffMs, 0.5)),
        f(quantile(handoffMs, 0.99)),
        f(Math.max(...handoffMs)),
        f(quantile(contended.handoffMs, 0.5)),
        f(quantile(contended.handoffMs, 0.99)),
        f(Math.max(...contended.handoffMs)),
        `${f(quantile(contended.timerLateMs, 0.99))} / ${f(Math.max(...contended.timerLateMs))}`,
        contended.holdsPerSecond.toFixed(0),
        `${(contended.toOtherProcess * 100).toFixed(0)} %`,
      ])
    }
    console.log('')
    console.log(
      renderGrid(
        [
          'lock',
          'acquire p50 ms',
          'acquire p99',
          'release p50',
          'release p99',
          'hand-off p50',
          'hand-off p99',
          'hand-off max',
          `${CONTENTION}-proc hand-off p50`,
          'p99',
          'max',
          'timer late p99 / max',
          'holds/s',
          'to another process',
        ],
        rows,
      ),
    )
  } finally {
    const exited = new Promise((resolve) => waiter.once('exit', resolve))
    waiter.disconnect()
    await Promise.race([exited, sleep(10_000)]) // it closes its clients before the servers go
    await Promise.all([...servers.map((server) => server.stop()), consensus.stop()])
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
