/**
 * `npm run bench:codec`: what the default codec costs against bare JSON, on the bench:hit
 * payload (plain JSON: the stored form is byte for byte JSON.stringify's, and the hit path's
 * decode is JSON.parse after one character check) and on the same row with a Date (tagged).
 * Alternating rounds, the best of each side, CPU time: a noisy neighbour hurts both alike.
 * With OLD_CODEC=path/to/old/codecs.ts, the previous jsonCodec runs beside it as well.
 */
import { jsonCodec } from '../../src/index.js'
import type { Codec } from '../../src/codecs.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7)
const CALLS = 50_000

const plainRow = {
  id: 1,
  name: 'widget 1',
  price: 9.99,
  currency: 'EUR',
  stock: 42,
  tags: ['blue', 'small', 'metal', 'sale'],
  description: 'A small blue metal widget. '.repeat(12),
  updatedAt: '2026-01-01T00:00:00.000Z',
}
const datedRow = { ...plainRow, updatedAt: new Date('2026-01-01T00:00:00.000Z') }

const bare: Codec = { encode: (value) => JSON.stringify(value), decode: (text) => JSON.parse(text) as unknown }
const codecs: [string, Codec][] = [
  ['JSON.stringify / JSON.parse', bare],
  ['jsonCodec', jsonCodec],
]
if (process.env.OLD_CODEC) {
  const old = (await import(process.env.OLD_CODEC)) as { jsonCodec: Codec }
  codecs.push(['previous jsonCodec', old.jsonCodec])
}

/** CPU ns per call. */
function cpuPerCall(run: () => unknown): number {
  const start = process.cpuUsage()
  for (let i = 0; i < CALLS; i++) run()
  const used = process.cpuUsage(start)
  return ((used.user + used.system) * 1_000) / CALLS
}

function compare(title: string, value: unknown): void {
  const best = new Map<string, { encode: number; decode: number }>()
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, codec] of codecs) {
      let text: string
      try {
        text = codec.encode(value)
      } catch {
        continue // this codec refuses the value
      }
      const encode = cpuPerCall(() => codec.encode(value))
      const decode = cpuPerCall(() => codec.decode(text))
      const seen = best.get(name)
      best.set(name, {
        encode: Math.min(encode, seen?.encode ?? Infinity),
        decode: Math.min(decode, seen?.decode ?? Infinity),
      })
    }
  }
  const baseline = best.get(codecs[0]![0])!
  console.log(`${title}: ${JSON.stringify(jsonCodec.encode(value)).length - 2} bytes stored by jsonCodec`)
  for (const [name, { encode, decode }] of best) {
    console.log(
      `  ${name.padEnd(28)} encode ${(encode / 1000).toFixed(2).padStart(6)} µs (${(encode / baseline.encode).toFixed(2)}×)` +
        `  decode ${(decode / 1000).toFixed(2).padStart(6)} µs (${(decode / baseline.decode).toFixed(2)}×)`,
    )
  }
}

console.log(`codec cost on Node ${process.version}, best of ${ROUNDS} alternating rounds of ${CALLS} calls, CPU time`)
compare('plain row (the bench:hit payload)', plainRow)
compare('the same row with updatedAt a Date', datedRow)
