/**
 * `npm run bench:wakeup`: how long after the leader's value is ready do the waiters in
 * OTHER processes get it?
 *
 * One leader process and W waiter processes share a Redis. Each round uses a new key:
 *   1. the leader calls getOrLoad; its loader signals "loading" and holds the lock for a
 *      random 40–240 ms: spread over two whole poll intervals, so the moment the value
 *      lands is uniformly placed within the spin lock's 100 ms poll cycle (a fair baseline);
 *   2. on "loading", every waiter process calls getOrLoad on the same key and waits;
 *   3. the leader's loader returns (t0, the value is ready); each waiter records when its
 *      call returned (t1). Wake-up latency = t1 − t0. It includes the leader's commit
 *      round trip: it is the delay a user actually sees.
 * stampede-guard (pub/sub wake-up) and a 100 ms spin lock (SET NX PX + sleep loop) run in
 * the same invocation against the same Redis, one after the other.
 *
 * Clocks: every process reports performance.timeOrigin + performance.now(). On one
 * machine these agree to well under a millisecond; the bench measures each child's offset
 * (ping-pong, best of 25) and corrects for it, and prints the bound.
 */
import { parseArgs } from 'node:util'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import cliProgress from 'cli-progress'
import { BenchChild } from '../shared/bench-child.js'
import { benchRedis } from '../shared/redis-server.js'
import { bold, dim } from '../shared/format.js'
import type { ChildToParent, ParentToChild, Strategy } from './protocol.js'

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '100' },
    'waiter-processes': { type: 'string', default: '3' },
    'callers-per-process': { type: 'string', default: '1' },
  },
})
const ROUNDS = Number(args.rounds)
const WAITER_PROCESSES = Number(args['waiter-processes'])
const CALLERS = Number(args['callers-per-process'])
const STRATEGIES: Strategy[] = ['stampede-guard', 'spin-lock']
const now = () => performance.timeOrigin + performance.now()

/** A child whose clock offset to ours is measured, to put its timestamps on our timeline. */
class Child extends BenchChild<ChildToParent, ParentToChild> {
  /** This child's clock minus ours, in ms. */
  offsetMs = 0

  /** Best-of-N ping-pong: offset = child clock − midpoint of our send/receive; bound = RTT/2. */
  async calibrate(samples = 25): Promise<{ offsetMs: number; boundMs: number }> {
    let best = { rtt: Infinity, offset: 0 }
    for (let seq = 0; seq < samples; seq++) {
      const sentAt = now()
      const reply = this.next('clock', (m) => m.seq === seq)
      this.send({ type: 'clock', seq })
      const { now: childNow } = await reply
      const receivedAt = now()
      const rtt = receivedAt - sentAt
      if (rtt < best.rtt) best = { rtt, offset: childNow - (sentAt + receivedAt) / 2 }
    }
    this.offsetMs = best.offset
    return { offsetMs: best.offset, boundMs: best.rtt / 2 }
  }

  /** A child's timestamp on our timeline. */
  toLocal(t: number): number {
    return t - this.offsetMs
  }
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

async function main(): Promise<void> {
  const { url, privateServer: privateRedis } = await benchRedis('bench:wakeup')
  const namespace = `sg-wakeup-${randomBytes(4).toString('hex')}`
  const file = fileURLToPath(new URL('./bench-process.ts', import.meta.url))
  const env = { BENCH_REDIS_URL: url, BENCH_NAMESPACE: namespace }
  const leader = new Child(file, env)
  const waiters = Array.from({ length: WAITER_PROCESSES }, () => new Child(file, env))
  const children = [leader, ...waiters]

  try {
    await Promise.all(children.map((c) => c.next('ready', undefined, 30_000)))
    const clocks = await Promise.all(children.map((c) => c.calibrate()))
    const maxOffset = Math.max(...clocks.map((c) => Math.abs(c.offsetMs)))
    const maxBound = Math.max(...clocks.map((c) => c.boundMs))

    console.log(bold('stampede-guard wake-up benchmark'))
    console.log(
      `  1 leader process + ${WAITER_PROCESSES} waiter processes × ${CALLERS} caller(s), ${ROUNDS} rounds per strategy, Redis ${privateRedis ? `(private) ${url}` : 'from REDIS_URL'}`,
    )
    console.log(
      `  clocks: largest offset between processes ${maxOffset.toFixed(3)} ms, measured to ±${maxBound.toFixed(3)} ms (corrected for)`,
    )
    console.log('')

    const bar = process.stderr.isTTY
      ? new cliProgress.SingleBar(
          {
            stream: process.stderr,
            format: ' {bar} {value}/{total} rounds | {strategy}',
            clearOnComplete: true,
            hideCursor: true,
          },
          cliProgress.Presets.shades_classic,
        )
      : undefined
    bar?.start(ROUNDS * STRATEGIES.length, 0, { strategy: '' })

    const results: {
      strategy: Strategy
      latencies: number[]
      ranLoader: number
      lateStarts: number
      commitMs: number[]
    }[] = []
    for (const strategy of STRATEGIES) {
      const latencies: number[] = []
      const commitMs: number[] = []
      let ranLoader = 0
      let lateStarts = 0
      for (let round = 0; round < ROUNDS; round++) {
        const key = `${strategy}-${round}`
        const holdMs = 40 + Math.random() * 200
        const loading = leader.next('loading', (m) => m.key === key)
        const led = leader.next('led', (m) => m.key === key)
        leader.send({ type: 'lead', strategy, key, holdMs })
        await loading
        const waited = waiters.map((w) => w.next('waited', (m) => m.key === key))
        for (const w of waiters) w.send({ type: 'wait', strategy, key, callers: CALLERS })
        const leaderResult = await led
        const t0 = leader.toLocal(leaderResult.loaderDoneAt)
        commitMs.push(leaderResult.returnedAt - leaderResult.loaderDoneAt)
        const answers = await Promise.all(waited)
        answers.forEach((answer, i) => {
          for (const s of answer.samples) {
            if (s.ranLoader) ranLoader++
            // A waiter that only started after the value was ready measured a plain hit, not a wake-up.
            if (waiters[i]!.toLocal(s.startedAt) >= t0) lateStarts++
            else latencies.push(waiters[i]!.toLocal(s.returnedAt) - t0)
          }
        })
        bar?.increment(1, { strategy })
      }
      results.push({
        strategy,
        latencies: latencies.sort((a, b) => a - b),
        ranLoader,
        lateStarts,
        commitMs: commitMs.sort((a, b) => a - b),
      })
    }
    bar?.stop()

    const header = ['strategy', 'samples', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'mean ms', 'waiters that loaded']
    const rows = results.map((r) => [
      r.strategy === 'spin-lock' ? 'spin lock, 100 ms poll' : 'stampede-guard (pub/sub)',
      String(r.latencies.length),
      ...[50, 90, 99, 100].map((p) => percentile(r.latencies, p).toFixed(2)),
      (r.latencies.reduce((a, b) => a + b, 0) / Math.max(1, r.latencies.length)).toFixed(2),
      String(r.ranLoader),
    ])
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
    const line = (cells: string[]) =>
      cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')
    console.log(bold("Wake-up latency: waiter returns − leader's value ready (includes the commit round trip)"))
    console.log(line(header))
    console.log(widths.map((w) => '─'.repeat(w)).join('  '))
    for (const row of rows) console.log(line(row))
    console.log('')
    const sg = results.find((r) => r.strategy === 'stampede-guard')!
    const spinR = results.find((r) => r.strategy === 'spin-lock')!
    console.log(
      `stampede-guard's waiters return ${(percentile(spinR.latencies, 50) / Math.max(0.001, percentile(sg.latencies, 50))).toFixed(0)}× sooner at the median ` +
        `(${percentile(sg.latencies, 50).toFixed(2)} ms vs ${percentile(spinR.latencies, 50).toFixed(2)} ms) and ` +
        `${(percentile(spinR.latencies, 99) / Math.max(0.001, percentile(sg.latencies, 99))).toFixed(0)}× at p99.`,
    )
    console.log(
      dim(
        `leader's commit round trip (loader return → getOrLoad resolves): stampede-guard p50 ` +
          `${percentile(sg.commitMs, 50).toFixed(2)} ms, spin lock p50 ${percentile(spinR.commitMs, 50).toFixed(2)} ms`,
      ),
    )
    const late = results.reduce((a, r) => a + r.lateStarts, 0)
    if (late)
      console.log(
        dim(
          `${late} waiter call(s) started after the value was ready and were left out (a plain hit is not a wake-up).`,
        ),
      )
  } finally {
    for (const c of children) if (c.proc.connected) c.send({ type: 'exit' })
    await Promise.all(
      children.map((c) => new Promise((r) => (c.proc.exitCode !== null ? r(null) : c.proc.once('exit', r)))),
    )
    if (privateRedis) await privateRedis.stop()
    else if (url) {
      // Leave nothing behind on someone else's Redis.
      const client = new Redis(url)
      for (const pattern of [`${namespace}:*`, 'spin:stampede-guard-*', 'spin:spin-lock-*']) {
        let cursor = '0'
        do {
          const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 500)
          cursor = next
          if (keys.length) await client.del(...keys)
        } while (cursor !== '0')
      }
      client.disconnect()
    }
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})
