/**
 * `npm run bench:codec`: what the default codec costs against bare JSON, on the bench:hit
 * payload (plain JSON: the stored form is byte for byte JSON.stringify's, and the hit path's
 * decode is JSON.parse after one character check) and on the same row with a Date (tagged).
 * Alternating rounds, the best of each side, CPU time: a noisy neighbour hurts both alike.
 * msgpackCodec runs beside them (its bytes, as stored after the codec's mark), and the
 * stored-form layer (decodeValue: the one-byte check before the codec, and a compressed
 * value's inflation) on the same payloads and on a 50 KB one.
 * With OLD_CODEC=path/to/old/codecs.ts, the previous jsonCodec runs beside it as well.
 */
import { jsonCodec, msgpackCodec } from '../../src/index.js'
import type { Codec } from '../../src/codecs.js'
import { resolveCompression } from '../../src/compression.js'
import { compressed, decodeValue, encodeValue, valueFormat } from '../../src/stored-value.js'
import { product } from '../shared/product.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7)
const CALLS = 50_000

const plainRow = product(1)
const datedRow = { ...plainRow, updatedAt: new Date('2026-01-01T00:00:00.000Z') }

const largeRows = {
  rows: Array.from({ length: 400 }, (_, id) => ({
    id,
    name: `user ${id}`,
    email: `user${id}@example.com`,
    createdAt: new Date(1_767_323_045_678 + id * 1000).toISOString(),
    score: (id * 7919) % 10_007,
    active: id % 3 === 0,
  })),
}

/** A codec as this bench drives it: whatever encode gives, decode takes. */
interface Measured {
  encode(value: unknown): unknown
  decode(data: never): unknown
}
const MAX = 32 * 1024 * 1024
/** The cache's stored-form layer around `codec`: encoded (and compressed) as stored, decoded from the bytes Redis returns. */
const storedForm = (codec: Codec | ReturnType<typeof msgpackCodec>, compression?: boolean): Measured => {
  const format = valueFormat(codec, resolveCompression(compression), MAX)
  return {
    encode: (value) => {
      const data = compressed(format, encodeValue(format, value))
      return typeof data === 'string' ? Buffer.from(data) : data
    },
    decode: (data: Buffer) => decodeValue(format, data),
  }
}
const bare: Codec = { encode: (value) => JSON.stringify(value), decode: (text) => JSON.parse(text) as unknown }
const codecs: [string, Measured][] = [
  ['JSON.stringify / JSON.parse', bare],
  ['jsonCodec', jsonCodec],
  ['jsonCodec, stored form', storedForm(jsonCodec)],
  ['msgpackCodec, stored form', storedForm(msgpackCodec())],
  ['jsonCodec + brotli, stored form', storedForm(jsonCodec, true)],
]
if (process.env.OLD_CODEC) {
  const old = (await import(process.env.OLD_CODEC)) as { jsonCodec: Codec }
  codecs.push(['previous jsonCodec', old.jsonCodec])
}

/** CPU ns per call. */
function cpuPerCall(run: () => unknown, calls = CALLS): number {
  const start = process.cpuUsage()
  for (let i = 0; i < calls; i++) run()
  const used = process.cpuUsage(start)
  return ((used.user + used.system) * 1_000) / calls
}

function compare(title: string, value: unknown, calls = CALLS): void {
  const best = new Map<string, { encode: number; decode: number }>()
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, codec] of codecs) {
      let text: never
      try {
        text = codec.encode(value) as never
      } catch {
        continue // this codec refuses the value
      }
      const encode = cpuPerCall(() => codec.encode(value), calls)
      const decode = cpuPerCall(() => codec.decode(text), calls)
      const seen = best.get(name)
      best.set(name, {
        encode: Math.min(encode, seen?.encode ?? Infinity),
        decode: Math.min(decode, seen?.decode ?? Infinity),
      })
    }
  }
  const baseline = best.get(codecs[0]![0])!
  console.log(`${title}: ${Buffer.byteLength(jsonCodec.encode(value))} bytes stored by jsonCodec`)
  for (const [name, { encode, decode }] of best) {
    const size = (codecs.find(([n]) => n === name)![1].encode(value) as { length: number }).length
    console.log(
      `  ${name.padEnd(32)} ${String(size).padStart(6)} B  encode ${(encode / 1000).toFixed(2).padStart(6)} µs (${(encode / baseline.encode).toFixed(2)}×)` +
        `  decode ${(decode / 1000).toFixed(2).padStart(6)} µs (${(decode / baseline.decode).toFixed(2)}×)`,
    )
  }
}

console.log(`codec cost on Node ${process.version}, best of ${ROUNDS} alternating rounds of ${CALLS} calls, CPU time`)
compare('plain row (the bench:hit payload)', plainRow)
compare('the same row with updatedAt a Date', datedRow)
compare('400 rows (a large value: brotli above 16 KiB)', largeRows, 500)
