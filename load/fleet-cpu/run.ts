/**
 * `npm run bench:fleet-cpu`: what the cache costs a fleet in CPU, outside any HTTP framework.
 * P processes each run `loops` loops calling getOrLoad on Zipf-distributed keys (1,000 keys,
 * s = 1, the zipf scenario's cache options, a 50 ms loader), pausing `gap-ms` between calls,
 * so that the call rate is an app's, not a tight loop's. Each round runs the fleet in-process
 * (no Redis: each process loads on its own) and over one Redis, one after the other.
 *
 * A third run is the seed's spin lock over the same Redis (a `GET` per call, no L1): what a
 * Redis round trip per call costs at this rate.
 *
 * Per variant: calls and loads, the fleet's CPU per call and per load (every thread), the
 * main thread's share (the rest is V8's helper threads: GC and compilation), the kernel's
 * share, and the Redis commands per load. The difference per call between the two variants
 * is what sharing the cache through Redis costs at this rate; `npm run load` shows the same
 * cost inside an Express app, where HTTP's CPU hides most of it.
 *
 * BENCH_NODE_FLAGS (space-separated) go to every process: `--cpu-prof`, `--trace-deopt`…
 */
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { ChildProcess } from 'node:child_process'
import { BenchChild } from '../shared/bench-child.js'
import { benchRedis } from '../shared/redis-server.js'
import type { FleetChildToParent, FleetParentToChild } from './protocol.js'

const { values: args } = parseArgs({
  options: {
    processes: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '8' },
    'warm-up': { type: 'string', default: '3' },
    loops: { type: 'string', default: '25' },
    'gap-ms': { type: 'string', default: '8' },
    rounds: { type: 'string', default: '2' },
    variants: { type: 'string', default: 'in-process,redis,spinlock' },
  },
})
const PROCESSES = Number(args.processes)
const DURATION_MS = Number(args.seconds) * 1000
const LOOPS = Number(args.loops)
const WARM_UP_MS = Number(args['warm-up']) * 1000
const GAP_MS = Number(args['gap-ms'])
const ROUNDS = Number(args.rounds)
for (const [name, n] of Object.entries({ PROCESSES, DURATION_MS, LOOPS, ROUNDS }))
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: expected a whole number ≥ 1`)
const VARIANTS = new Set(args.variants.split(',').map((v) => v.trim()))
for (const v of VARIANTS)
  if (!['in-process', 'redis', 'spinlock'].includes(v)) throw new Error(`--variants: unknown '${v}'`)
if (!(WARM_UP_MS >= 0)) throw new Error('--warm-up: expected seconds ≥ 0')
if (!(GAP_MS >= 0)) throw new Error('--gap-ms: expected a number ≥ 0')

type Done = Extract<FleetChildToParent, { type: 'done' }>

function exited(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
    child.once('exit', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}

async function fleet(redisUrl: string, cache: 'ours' | 'spinlock' = 'ours'): Promise<Done[]> {
  const file = fileURLToPath(new URL('./process.ts', import.meta.url))
  const env = {
    BENCH_REDIS_URL: redisUrl,
    BENCH_NAMESPACE: `sg-fleet-${randomBytes(4).toString('hex')}`,
    BENCH_CACHE: cache,
  }
  const flags = process.env.BENCH_NODE_FLAGS?.split(' ').filter(Boolean) ?? []
  const children = Array.from(
    { length: PROCESSES },
    () => new BenchChild<FleetChildToParent, FleetParentToChild>(file, env, 60_000, flags),
  )
  try {
    await Promise.all(children.map((c) => c.next('ready')))
    const done = children.map((c) => c.next('done', undefined, WARM_UP_MS + DURATION_MS + 30_000))
    for (const c of children)
      c.send({
        type: 'go',
        warmUpMs: WARM_UP_MS,
        durationMs: DURATION_MS,
        gapMs: GAP_MS,
        loops: LOOPS,
      })
    return await Promise.all(done)
  } finally {
    // Each process exits by itself after its report (a profile is written then); a stuck one is killed.
    await Promise.all(children.map((c) => exited(c.proc, 5_000)))
  }
}

function describe(label: string, results: Done[]): { cpuPerCall: number } {
  const sum = (f: (d: Done) => number) => results.reduce((a, d) => a + f(d), 0)
  const calls = sum((d) => d.calls)
  const loads = sum((d) => d.loads)
  const cpu = sum((d) => d.cpuUs)
  const commands: Record<string, number> = {}
  for (const d of results) for (const [k, v] of Object.entries(d.commands)) commands[k] = (commands[k] ?? 0) + v
  const perLoad = Object.entries(commands)
    .filter(([, n]) => n / loads >= 0.01)
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k} ${(n / loads).toFixed(2)}`)
    .join(', ')
  console.log(
    `${label.padEnd(11)} calls ${calls.toLocaleString('en-US').padStart(7)}  loads ${loads.toLocaleString('en-US').padStart(6)}` +
      `  CPU ${(cpu / calls).toFixed(1).padStart(6)} µs/call ${(cpu / loads).toFixed(0).padStart(5)} µs/load` +
      `  main thread ${((100 * sum((d) => d.mainThreadUs)) / cpu).toFixed(0)} %, kernel ${((100 * sum((d) => d.systemUs)) / cpu).toFixed(0)} %` +
      (perLoad ? `  Redis commands per load: ${perLoad}` : ''),
  )
  return { cpuPerCall: cpu / calls }
}

const { url, privateServer } = await benchRedis('bench:fleet-cpu')
console.log(
  `fleet CPU: ${PROCESSES} processes × ${LOOPS} loops, a call then ${GAP_MS} ms of pause, ${DURATION_MS / 1000} s per run after ${WARM_UP_MS / 1000} s unmeasured, ` +
    `1,000 Zipf keys, ttl 2 s + 10 s stale, 50 ms loader, ${ROUNDS} rounds`,
)
try {
  for (let round = 1; round <= ROUNDS; round++) {
    const local = VARIANTS.has('in-process') ? describe(`in-process`, await fleet('')) : undefined
    const shared = VARIANTS.has('redis') ? describe(`over Redis`, await fleet(url)) : undefined
    const spin = VARIANTS.has('spinlock') ? describe(`spin lock`, await fleet(url, 'spinlock')) : undefined
    if (local && shared && spin)
      console.log(
        `  round ${round}: over Redis adds ${(shared.cpuPerCall - local.cpuPerCall).toFixed(1)} µs of CPU per call` +
          ` to in-process; the spin lock (a GET per call) adds ${(spin.cpuPerCall - local.cpuPerCall).toFixed(1)}`,
      )
  }
} finally {
  await privateServer?.stop()
}
