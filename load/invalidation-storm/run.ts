/**
 * `npm run bench:invalidation-storm`: what a storm of deletes costs the processes that receive
 * its invalidations (the counts are test/cache/invalidation-storm.test.ts).
 *
 * A receiver child process (test/fixtures/storm-receiver.ts) holds `--keys` keys in L1; this
 * process deletes them through a cache of its own at `--rate` deletes a second, in steps of
 * 10 ms. Two phases:
 * 1. running: `--duration` ms of storm; the receiver's event-loop delay (p99, max) meanwhile;
 * 2. stalled: the L1 filled again, the receiver stopped (SIGSTOP) for `--stall` ms of storm,
 *    then let go on. Its subscriber connection's largest output buffer in Redis (CLIENT LIST
 *    omem), whether it lost that connection (its `redis-error` events; connections the server
 *    accepted), and how many deleted values it serves afterwards.
 * For both: messages on the invalidation channel, and the bytes each subscriber is sent per delete.
 *
 * `-- --rate 5000 --duration 5000 --stall 5000 --keys 20000 --key-bytes 0` (key-bytes pads
 * each key to that length: HTTP cache keys are URLs).
 */
import { parseArgs } from 'node:util'
import { createCache } from '../../src/index.js'
import { connectionCounts, countChannel, stalled, storm } from '../../test/support/invalidation-storm.js'
import { startRedis, stopAllRedis } from '../../test/support/redis.js'
import { forkWorker } from '../../test/support/workers.js'

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '5000' },
    duration: { type: 'string', default: '5000' },
    stall: { type: 'string', default: '5000' },
    keys: { type: 'string', default: '20000' },
    'key-bytes': { type: 'string', default: '0' },
  },
})
const RATE = Number(args.rate)
const KEY_BYTES = Number(args['key-bytes'])
const CHANNEL = 'sg:__invalidations'
const PROBE = 'storm-probe'

const keys = Array.from({ length: Number(args.keys) }, (_, i) => {
  const key = `item:${i}:`
  return key.padEnd(Math.max(KEY_BYTES, key.length), 'x')
})
const keyBytes = keys.reduce((sum, key) => sum + Buffer.byteLength(key), 0) / keys.length

const server = await startRedis({ args: ['--loglevel', 'warning'] })
const admin = server.client()
const receiver = await forkWorker(new URL('../../test/fixtures/storm-receiver.ts', import.meta.url), {
  env: { REDIS_URL: server.url },
})
const sender = createCache({ redis: server.client(), ttl: '10m', l1: false })
await sender.ready()
const channel = await countChannel(server.client({ connectionName: PROBE }), CHANNEL)

/** Waits until the receiver has taken in every message published before `marker`'s invalidation. */
async function drained(marker: string): Promise<void> {
  await sender.deleteByTag(marker)
  if (!(await receiver.request<boolean>({ op: 'tag-seen', tag: marker, timeoutMs: 120_000 }, 130_000)))
    throw new Error('the receiver never saw the end of the storm')
}

const line = (label: string, value: string) => console.log(`${label.padEnd(48)} ${value}`)
console.log(
  `invalidation storm: ${RATE} deletes/s over ${keys.length} keys of ${keyBytes.toFixed(1)} bytes, receiver with L1\n`,
)

// 1. Running receiver: its event loop while the invalidations arrive.
await receiver.request({ op: 'fill', keys, marker: 'running-end' }, 300_000)
let seen = { messages: channel.messages, bytes: channel.bytes }
await receiver.request({ op: 'loop-start' })
const running = await storm(sender, admin, keys, { rate: RATE, durationMs: Number(args.duration), probeName: PROBE })
await drained('running-end')
const loop = await receiver.request<{ p99: number; max: number }>({ op: 'loop-stop' })
line('running: deletes (refused by the sender)', `${running.deletes} (${running.refused})`)
line('running: messages on the channel', String(channel.messages - seen.messages - 1))
line('running: bytes per delete, each subscriber', ((channel.bytes - seen.bytes) / running.deletes).toFixed(1))
line("running: receiver's event-loop p99 / max", `${loop.p99.toFixed(1)} / ${loop.max.toFixed(1)} ms`)

// 2. Stalled receiver: does it keep its subscriber connection, and serve what was deleted?
await receiver.request({ op: 'fill', keys, marker: 'stalled-end' }, 300_000)
seen = { messages: channel.messages, bytes: channel.bytes }
const before = await connectionCounts(admin)
const stall = await stalled(receiver, () =>
  storm(sender, admin, keys, { rate: RATE, durationMs: Number(args.stall), probeName: PROBE }),
)
await drained('stalled-end')
const after = await connectionCounts(admin)
line('stalled: deletes while stopped (refused)', `${stall.deletes} (${stall.refused})`)
line('stalled: messages on the channel', String(channel.messages - seen.messages - 1))
line('stalled: bytes per delete, each subscriber', ((channel.bytes - seen.bytes) / stall.deletes).toFixed(1))
line("stalled: receiver's peak output buffer (omem)", `${stall.peakOutputBuffer} bytes`)
line('stalled: subscriber connections lost', String(await receiver.request<number>({ op: 'losses' })))
line('stalled: connections accepted meanwhile', String(after.accepted - before.accepted))
line(
  'stalled: clients dropped for their output buffer',
  after.bufferKills === undefined ? 'not counted by this Redis' : String(after.bufferKills - before.bufferKills!),
)
const deleted = keys.slice(0, Math.min(stall.deletes, keys.length)) // each storm starts at the first key
line(
  'stalled: deleted values served afterwards',
  `${await receiver.request<number>({ op: 'check', keys: deleted }, 300_000)} of ${deleted.length} keys`,
)

await sender.close()
await receiver.stop()
await stopAllRedis()
process.exit(0)
