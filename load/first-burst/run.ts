/**
 * `npm run bench:first-burst`: the first burst a freshly started fleet sees. Each round
 * starts P new processes (each creates its cache, as a server does at boot), then sends
 * every one `calls` concurrent calls for one cold key whose loader takes `loader-ms`.
 * One call in the fleet loads; every other call waits (in its process, or in another
 * process over pub/sub). Goal: the waiters' p99 ≤ loader time + 15 ms.
 *
 * Two variants: the processes await `cache.ready()` before they say they are up (a server
 * awaiting it before it listens), or they say so right after createCache (set-up runs in
 * the background and races the burst).
 *
 * BENCH_DEBUG=1 prints each round's processes: `L` loaded (`loader@` ms after its go) or `w`
 * waited, its go in ms after the leader's, `conn+` ms when its Redis connection came up after
 * its go (a process still starting up), and its callers' p50 and max.
 */
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import type { ChildProcess } from 'node:child_process'
import { forkTs } from '../shared/fork-ts.js'
import { benchRedis } from '../shared/redis-server.js'
import type { BurstChildToParent, BurstParentToChild } from './protocol.js'

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    processes: { type: 'string', default: '4' },
    calls: { type: 'string', default: '50' },
    'loader-ms': { type: 'string', default: '50' },
  },
})
const ROUNDS = Number(args.rounds)
const PROCESSES = Number(args.processes)
const CALLS = Number(args.calls)
const LOADER_MS = Number(args['loader-ms'])

function nextMessage<T extends BurstChildToParent['type']>(
  child: ChildProcess,
  type: T,
  timeoutMs: number,
): Promise<Extract<BurstChildToParent, { type: T }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`child ${child.pid}: no '${type}' within ${timeoutMs} ms`)),
      timeoutMs,
    )
    const onMessage = (m: BurstChildToParent) => {
      if (m.type !== type) return
      clearTimeout(timer)
      child.off('message', onMessage)
      resolve(m as Extract<BurstChildToParent, { type: T }>)
    }
    child.on('message', onMessage)
  })
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

async function round(url: string, awaitReady: boolean, key: string): Promise<{ waiters: number[]; loads: number }> {
  const file = fileURLToPath(new URL('./process.ts', import.meta.url))
  const env = {
    BENCH_REDIS_URL: url,
    BENCH_NAMESPACE: `sg-burst-${randomBytes(4).toString('hex')}`,
    BENCH_AWAIT_READY: awaitReady ? '1' : '0',
  }
  const children = Array.from({ length: PROCESSES }, () => forkTs(file, env))
  try {
    await Promise.all(children.map((c) => nextMessage(c, 'ready', 60_000)))
    const bursts = children.map((c) => nextMessage(c, 'burst', 30_000))
    for (const c of children)
      c.send({ type: 'go', key, calls: CALLS, loaderMs: LOADER_MS } satisfies BurstParentToChild)
    const all = await Promise.all(bursts)
    if (process.env.BENCH_DEBUG) {
      const leaderGo = all.find((b) => b.led)?.goAt ?? 0
      console.log(
        all
          .map(
            (b) =>
              `${b.led ? `L loader@${b.loaderMs!.toFixed(1)}` : 'w'} go${(b.goAt - leaderGo).toFixed(1)} ` +
              `${b.connectedMs > 0 ? `conn+${b.connectedMs.toFixed(1)} ` : ''}p50 ${percentile(
                b.samples.map((s) => s.ms).sort((x, y) => x - y),
                50,
              ).toFixed(1)} max ${Math.max(...b.samples.map((s) => s.ms)).toFixed(1)}`,
          )
          .join(' | '),
      )
    }
    const samples = all.flatMap((b) => b.samples)
    return {
      waiters: samples.filter((s) => !s.ranLoader).map((s) => s.ms),
      loads: samples.filter((s) => s.ranLoader).length,
    }
  } finally {
    for (const c of children) {
      if (c.connected) c.send({ type: 'exit' } satisfies BurstParentToChild)
      const timer = setTimeout(() => c.kill('SIGKILL'), 5_000)
      await new Promise((resolve) =>
        c.exitCode !== null || c.signalCode !== null ? resolve(null) : c.once('exit', resolve),
      )
      clearTimeout(timer)
    }
  }
}

const { url, privateServer: privateRedis } = await benchRedis('bench:first-burst')
try {
  console.log(
    `first burst on freshly started processes: ${PROCESSES} processes × ${CALLS} calls on one cold key, ${LOADER_MS} ms loader, ${ROUNDS} rounds per variant`,
  )
  for (const awaitReady of [true, false]) {
    const waiters: number[] = []
    let loads = 0
    for (let r = 0; r < ROUNDS; r++) {
      const result = await round(url, awaitReady, `cold-${r}-${randomBytes(3).toString('hex')}`)
      waiters.push(...result.waiters)
      loads += result.loads
    }
    waiters.sort((a, b) => a - b)
    const p99 = percentile(waiters, 99)
    const label = awaitReady ? 'after await cache.ready()' : 'right after createCache'
    console.log(
      `${label.padEnd(28)} waiters ${String(waiters.length).padStart(5)}  p50 ${percentile(waiters, 50).toFixed(1).padStart(6)} ms  p99 ${p99.toFixed(1).padStart(6)} ` +
        `ms  max ${waiters.at(-1)!.toFixed(1).padStart(6)} ms  loads ${loads}/${ROUNDS}  (goal p99 ≤ ${LOADER_MS + 15} ms: ${p99 <= LOADER_MS + 15 ? 'met' : 'NOT met'})`,
    )
  }
} finally {
  await privateRedis?.stop()
}
