/**
 * `npm run bench:waiting`: what waiting costs Redis, by the number of keys waited on.
 *
 * For each size N, two child processes share a Redis: the holder calls getOrLoad on N cold
 * keys with loaders that hold their lock until told, and the waiter then asks for the same
 * N keys, so each of its calls waits on the holder. Once every call of the waiter is waiting
 * (or was answered: past the cap on waits, at once, by `onWaitTimeout`), both count for a
 * window of WINDOW ms:
 * - Redis commands per second, server-wide (INFO commandstats deltas: every command,
 *   including those scripts call), and per process, by what each one sent;
 * - the holder's lease renewals: script calls per second, and locks renewed per second;
 * - the waiter's polls: script calls per second, and keys polled per second;
 * - subscriptions (INFO stats pubsub_channels + pubsub_shardchannels);
 * - each process's event-loop delay p99.
 * Then the holder's loaders return and every call must end with the holder's value.
 *
 * `-- --sizes 100,1000,5000,20000 --window 5000 --max-waits 20000` (max-waits raises the
 * cap to show what the poll budget alone does). Uses a private redis-server unless REDIS_URL is set.
 */
import { parseArgs } from 'node:util'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { BenchChild } from '../shared/bench-child.js'
import { benchRedis } from '../shared/redis-server.js'
import { int, ms } from '../shared/format.js'
import type { ChildToParent, ParentToChild, Sample } from './protocol.js'

const { values: args } = parseArgs({
  options: {
    sizes: { type: 'string', default: '100,1000,5000,20000' },
    window: { type: 'string', default: '5000' },
    'max-waits': { type: 'string' },
    /** Only the heap per pending wait: stop once every call waits (a quick, repeatable reading). */
    'heap-only': { type: 'boolean', default: false },
    options: { type: 'string', default: '{}' },
  },
})
const SIZES = args.sizes.split(',').map(Number)
const WINDOW_MS = Number(args.window)
const cacheOptions = {
  ...JSON.parse(args.options),
  ...(args['max-waits'] ? { maxWaits: Number(args['max-waits']) } : {}),
}

class Child extends BenchChild<ChildToParent, ParentToChild> {
  constructor(file: string, env: NodeJS.ProcessEnv) {
    super(file, env, 120_000)
  }

  async stop(): Promise<void> {
    const exited = new Promise((resolve) => this.proc.once('exit', resolve))
    this.send({ type: 'exit' })
    await Promise.race([exited, sleep(5_000).then(() => this.proc.kill('SIGKILL'))])
  }
}

/** Every command's calls so far, server-wide, and the subscriptions. */
async function serverCounts(admin: Redis): Promise<{ calls: number; channels: number }> {
  const stats = await admin.info('commandstats')
  const calls = [...stats.matchAll(/^cmdstat_[\w|]+:calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0)
  const pubsub = await admin.info('stats')
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(pubsub)?.[1] ?? 0)
  return { calls, channels: field('pubsub_channels') + field('pubsub_shardchannels') }
}

const perSecond = (n: number, sample: Sample) => (n * 1000) / sample.windowMs
const sum = (sample: Sample, match: (name: string) => boolean) =>
  Object.entries(sample.commands)
    .filter(([name]) => match(name))
    .reduce((total, [, n]) => total + n, 0)
const scriptCalls = (sample: Sample, file: RegExp) =>
  sum(sample, (name) => name.startsWith('script ') && !name.endsWith(' keys') && file.test(name))
const scriptKeys = (sample: Sample, file: RegExp) => sum(sample, (name) => name.endsWith(' keys') && file.test(name))
const allCommands = (sample: Sample) => sum(sample, (name) => !name.endsWith(' keys'))

interface Row {
  keys: number
  waiting: number
  answeredAtOnce: number
  serverPerS: number
  waiterPerS: number
  pollCallsPerS: number
  polledKeysPerS: number
  holderPerS: number
  renewCallsPerS: number
  renewedPerS: number
  channels: number
  waiterP99: number
  holderP99: number
  waiterLoads: number
  waiterErrors: number
  holderLost: number
  holderFenced: number
  heapPerWait: number
  heapNetPerWait: number
  /** How long after the holder's call for a key returned (its commit done) the waiter's did: p99 and max, ms. */
  afterCommitP99: number
  afterCommitMax: number
  /** The waiter's most calls answered / parked waits resumed in one turn of its event loop. */
  perTurn: { answered: number; resumed: number }
}

async function measure(url: string, keys: number): Promise<Row | undefined> {
  const namespace = `sg-waiting-${randomBytes(4).toString('hex')}`
  const file = fileURLToPath(new URL('./process.ts', import.meta.url))
  const env = { BENCH_REDIS_URL: url, BENCH_NAMESPACE: namespace, BENCH_CACHE_OPTIONS: JSON.stringify(cacheOptions) }
  const holder = new Child(file, { ...env, BENCH_ROLE: 'holder' })
  const waiter = new Child(file, { ...env, BENCH_ROLE: 'waiter' })
  const admin = new Redis(url)
  try {
    await Promise.all([holder.next('ready'), waiter.next('ready')])
    const holding = holder.next('started')
    holder.send({ type: 'start', keys, prefix: 'cold' })
    await holding
    const started = waiter.next('started')
    waiter.send({ type: 'start', keys, prefix: 'cold' })
    const { waiting, settled, heapPerWait = NaN, heapNetPerWait = NaN, loads, stats } = await started
    if (args['heap-only']) {
      console.log(
        `${int(keys)} keys: ${int(waiting)} waiting, ${int(settled)} answered at once (${loads} loads; ` +
          `${stats?.['redis-error']} redis errors), ${int(heapPerWait)} B heap per pending wait, ` +
          `${int(heapNetPerWait)} B net of the harness's own per-call heap`,
      )
      return undefined
    }
    await sleep(1_000) // past the first, quick polls of a wait
    const before = await serverCounts(admin)
    holder.send({ type: 'sample' })
    waiter.send({ type: 'sample' })
    await sleep(WINDOW_MS)
    const holderReport = holder.next('sample')
    const waiterReport = waiter.next('sample')
    holder.send({ type: 'report' })
    waiter.send({ type: 'report' })
    const [{ sample: h }, { sample: w }] = await Promise.all([holderReport, waiterReport])
    const after = await serverCounts(admin)
    const holderDone = holder.next('done')
    const waiterDone = waiter.next('done')
    holder.send({ type: 'release' })
    const [led, waited] = await Promise.all([holderDone, waiterDone])
    if (waited.errors > 0) console.error(`  ${waited.errors} waiter calls failed`)
    if (led.stats['lock-lost']) console.error(`  the holder lost locks: ${JSON.stringify(led.lostReasons)}`)
    if (waited.loads > keys - waiting)
      console.error(
        `  the waiter loaded keys it waited on: waiter ${JSON.stringify(waited.stats)}, holder ${JSON.stringify(led.stats)}`,
      )
    const windowMs = (h.windowMs + w.windowMs) / 2
    const lags = waited.answeredAt.map((at, i) => at - led.answeredAt[i]!).sort((x, y) => x - y)
    return {
      keys,
      waiting,
      answeredAtOnce: settled,
      serverPerS: ((after.calls - before.calls) * 1000) / windowMs,
      waiterPerS: perSecond(allCommands(w), w),
      pollCallsPerS: perSecond(scriptCalls(w, /get-or-lock|poll|acquire/), w),
      polledKeysPerS: perSecond(scriptKeys(w, /get-or-lock|poll|acquire/), w),
      holderPerS: perSecond(allCommands(h), h),
      renewCallsPerS: perSecond(scriptCalls(h, /extend/), h),
      renewedPerS: perSecond(scriptKeys(h, /extend/), h),
      channels: before.channels,
      waiterP99: w.loopP99Ms,
      holderP99: h.loopP99Ms,
      waiterLoads: waited.loads,
      waiterErrors: waited.stats['redis-error'] ?? 0,
      holderLost: led.stats['lock-lost'] ?? 0,
      holderFenced: led.stats.fenced ?? 0,
      heapPerWait,
      heapNetPerWait,
      afterCommitP99: lags[Math.min(lags.length - 1, Math.floor(lags.length * 0.99))] ?? NaN,
      afterCommitMax: lags.at(-1) ?? NaN,
      perTurn: waited.perTurn,
    }
  } finally {
    await Promise.all([holder.stop(), waiter.stop()])
    admin.disconnect()
  }
}

const { url, privateServer } = await benchRedis('bench:waiting')
console.log(
  `bench:waiting on Node ${process.version}, redis at ${url}, window ${int(WINDOW_MS)} ms, options ${JSON.stringify(cacheOptions)}`,
)
const header = [
  'keys',
  'waiting',
  'answered at once',
  'Redis cmds/s (server)',
  'waiter cmds/s',
  'poll calls/s',
  'keys polled/s',
  'holder cmds/s',
  'renew calls/s',
  'locks renewed/s',
  'subscriptions',
  'waiter loop p99 ms',
  'holder loop p99 ms',
  'waiter loads',
  'waiter redis-errors',
  'holder locks lost',
  'holder commits fenced',
  'heap per pending wait B',
  'net of the harness B',
  'answered after commit p99 / max ms',
  'waiter most answered / resumed in one turn',
]
if (!args['heap-only']) {
  console.log(`| ${header.join(' | ')} |`)
  console.log(`|${header.map(() => ' ---: ').join('|')}|`)
}
try {
  for (const keys of SIZES) {
    const r = await measure(url, keys)
    if (!r) continue
    const cells = [
      r.keys,
      r.waiting,
      r.answeredAtOnce,
      r.serverPerS,
      r.waiterPerS,
      r.pollCallsPerS,
      r.polledKeysPerS,
      r.holderPerS,
      r.renewCallsPerS,
      r.renewedPerS,
      r.channels,
    ].map(int)
    console.log(
      `| ${[
        ...cells,
        ms(r.waiterP99),
        ms(r.holderP99),
        ...[r.waiterLoads, r.waiterErrors, r.holderLost, r.holderFenced, r.heapPerWait, r.heapNetPerWait].map(int),
        `${ms(r.afterCommitP99)} / ${ms(r.afterCommitMax)}`,
        `${int(r.perTurn.answered)} / ${int(r.perTurn.resumed)}`,
      ].join(' | ')} |`,
    )
  }
} finally {
  await privateServer?.stop()
}
