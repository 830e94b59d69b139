/**
 * An invalidation storm against a receiver child process (test/fixtures/storm-receiver.ts),
 * shared by test/cache/invalidation-storm.test.ts (counted) and `npm run bench:invalidation-storm`
 * (timed). This process deletes the receiver's keys at a steady rate through a cache of its
 * own, and counts what the invalidation channel carries (a plain subscriber of its own sees
 * every message, as each receiver's subscriber connection gets it) and what the server says
 * of the receiver's subscriber connection (its output buffer, and whether it was dropped).
 */
import type { Redis } from 'ioredis'
import type { Cache } from '../../src/index.js'
import type { Worker } from './workers.js'

/** `*3 $7 message $<n> <channel> $<m> <message>`: the bytes of one pub/sub message on the wire. */
function frameBytes(channel: Buffer, message: Buffer): number {
  const bulk = (length: number) => `$${length}\r\n`.length + length + 2
  return '*3\r\n'.length + bulk('message'.length) + bulk(channel.length) + bulk(message.length)
}

/** Counts the invalidation channel's messages and bytes on `probe` (a connection of its own). */
export async function countChannel(
  probe: Redis,
  channel: string,
): Promise<{ messages: number; bytes: number; last: string }> {
  const counts = { messages: 0, bytes: 0, last: '' }
  probe.on('messageBuffer', (name: Buffer, message: Buffer) => {
    counts.messages++
    counts.last = message.toString()
    counts.bytes += frameBytes(name, message)
  })
  await probe.subscribe(channel)
  return counts
}

/** The largest output buffer (CLIENT LIST omem) of the subscribed clients, the probe left out. */
async function subscriberBuffers(admin: Redis, probeName: string): Promise<number> {
  const list = (await admin.client('LIST')) as string
  let peak = 0
  for (const line of list.split('\n')) {
    if (!/ sub=[1-9]/.test(line) || line.includes(` name=${probeName} `)) continue
    peak = Math.max(peak, Number(/ omem=(\d+)/.exec(line)?.[1] ?? 0))
  }
  return peak
}

/**
 * Deletes `keys` in turn, `rate` a second for `durationMs` (in steps of 10 ms, each step's
 * deletes sent together, as a busy server's requests of one tick are), then waits for all
 * of them, counting those that failed (the sender's own command budget, past it). Samples
 * the subscribers' output buffers every 100 ms.
 */
export async function storm(
  sender: Cache,
  admin: Redis,
  keys: readonly string[],
  options: { rate: number; durationMs: number; probeName: string; from?: number },
): Promise<{ deletes: number; refused: number; peakOutputBuffer: number }> {
  const perStep = Math.round(options.rate / 100)
  const steps = Math.round(options.durationMs / 10)
  const pending: Promise<boolean>[] = []
  let peakOutputBuffer = 0
  let next = options.from ?? 0
  const started = performance.now()
  for (let step = 0; step < steps; step++) {
    for (let i = 0; i < perStep; i++)
      pending.push(
        sender.delete(keys[next++ % keys.length]!).then(
          () => true,
          () => false, // refused: counted, not left unhandled while the storm goes on
        ),
      )
    if (step % 10 === 0)
      peakOutputBuffer = Math.max(peakOutputBuffer, await subscriberBuffers(admin, options.probeName))
    const due = started + (step + 1) * 10
    const wait = due - performance.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
  }
  const refused = (await Promise.all(pending)).filter((done) => !done).length
  peakOutputBuffer = Math.max(peakOutputBuffer, await subscriberBuffers(admin, options.probeName))
  return { deletes: pending.length, refused, peakOutputBuffer }
}

/** Stops `receiver` (SIGSTOP) for the whole of `during`, then lets it go on (SIGCONT). */
export async function stalled<T>(receiver: Worker, during: () => Promise<T>): Promise<T> {
  receiver.kill('SIGSTOP')
  try {
    return await during()
  } finally {
    receiver.kill('SIGCONT')
  }
}

/** Connections the server accepted so far, and clients it dropped for their output buffer (Redis ≥ 7.2 counts those). */
export async function connectionCounts(admin: Redis): Promise<{ accepted: number; bufferKills: number | undefined }> {
  const stats = await admin.info('stats')
  const kills = /^client_output_buffer_limit_disconnections:(\d+)/m.exec(stats)?.[1]
  return {
    accepted: Number(/^total_connections_received:(\d+)/m.exec(stats)?.[1]),
    bufferKills: kills === undefined ? undefined : Number(kills),
  }
}
