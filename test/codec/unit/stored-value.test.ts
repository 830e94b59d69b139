/**
 * The stored form of a value (src/stored-value.ts): text codecs unchanged, a binary codec's
 * bytes after its name, BinaryValue heads of either kind, compression above a size, and
 * every malformed form a typed error (the cache reports it `corrupt`: a miss).
 */
import { randomBytes } from 'node:crypto'
import zlib from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { compressionAvailable, resolveCompression } from '../../../src/compression.js'
import {
  BinaryValue,
  CodecMismatchError,
  CorruptValueError,
  createCache,
  InvalidArgumentError,
  jsonCodec,
  msgpackCodec,
  type BinaryCodec,
} from '../../../src/index.js'
import { compressed, decodeValue, encodedSize, encodeValue, valueFormat } from '../../../src/stored-value.js'
import { ALL_BYTES, bytesCodec, richValue, rows } from '../../fixtures/codec-values.js'

const MAX = 32 * 1024 * 1024
const json = valueFormat(jsonCodec, undefined, MAX)
const msgpack = valueFormat(msgpackCodec(), undefined, MAX)
const compressing = (algorithm: 'brotli' | 'gzip' | 'deflate', minBytes = 1024) =>
  valueFormat(jsonCodec, resolveCompression({ algorithm, minBytes }), MAX)

/** What the cache stores: encoded, then compressed as the format says, as Redis gives it back. */
const stored = (format: ReturnType<typeof valueFormat>, value: unknown): Buffer => {
  const data = compressed(format, encodeValue(format, value))
  return typeof data === 'string' ? Buffer.from(data) : data
}

describe('text codecs', () => {
  it('store plain JSON byte for byte, unmarked', () => {
    expect(encodeValue(json, { a: 'héllo' })).toBe('{"a":"héllo"}')
    expect(decodeValue(json, Buffer.from('{"a":"héllo"}'))).toEqual({ a: 'héllo' })
  })
})

describe('binary codecs', () => {
  it('msgpack: stored after \\0sgc and its name, read back unchanged, Buffers as their bytes', () => {
    const data = stored(msgpack, richValue())
    expect(data.subarray(0, 12).toString('latin1')).toBe('\0sgc\x07msgpack')
    expect(data.includes(ALL_BYTES)).toBe(true) // the bytes themselves, no base64
    const back = decodeValue(msgpack, data) as Record<string, unknown>
    const { bytes, ...rest } = richValue()
    expect(back).toMatchObject(rest)
    expect(Buffer.from(back.bytes as Uint8Array).equals(bytes as Buffer)).toBe(true)
  })

  it('each value carries its own msgpack records: a fresh codec reads the tenth value of a shape', () => {
    const writer = valueFormat(msgpackCodec(), undefined, MAX)
    let last: Buffer | undefined
    for (let i = 0; i < 10; i++) last = stored(writer, { id: i, name: `n${i}` })
    expect(decodeValue(valueFormat(msgpackCodec(), undefined, MAX), last!)).toEqual({ id: 9, name: 'n9' })
  })

  it('the encoded bytes are a copy: a codec reusing its buffer does not change a stored value', () => {
    const shared = Buffer.alloc(4)
    const reusing: BinaryCodec = {
      binary: true,
      name: 'reuse',
      encode: (value) => (shared.writeUInt32BE(value as number), shared),
      decode: (bytes) => bytes.readUInt32BE(0),
    }
    const format = valueFormat(reusing, undefined, MAX)
    const first = stored(format, 1)
    stored(format, 2)
    expect(decodeValue(format, first)).toBe(1)
  })

  it('a BinaryValue with a binary codec head: head and bytes both exact', () => {
    const data = stored(msgpack, new BinaryValue({ when: new Date(5), kind: 'response' }, ALL_BYTES))
    const back = decodeValue(msgpack, data) as BinaryValue
    expect(back).toBeInstanceOf(BinaryValue)
    expect(back.head).toEqual({ when: new Date(5), kind: 'response' })
    expect(back.bytes.equals(ALL_BYTES)).toBe(true)
  })

  it('another codec is a CodecMismatchError, in either direction, and between binary codecs', () => {
    const packed = stored(msgpack, { a: 1 })
    const text = stored(json, { a: 1 })
    expect(() => decodeValue(json, packed)).toThrow(CodecMismatchError)
    expect(() => decodeValue(msgpack, text)).toThrow(CodecMismatchError)
    const bytes = valueFormat(bytesCodec, undefined, MAX)
    expect(() => decodeValue(bytes, packed)).toThrow(
      'written by the binary codec "msgpack", read with the binary codec "bytes"',
    )
    // A msgpack fixint 0x31 is "1" as text: without the mark JSON would read it as 1.
    expect(() => decodeValue(json, stored(msgpack, 49))).toThrow(CodecMismatchError)
  })

  it('a truncated name is corrupt', () => {
    expect(() => decodeValue(msgpack, Buffer.from('\0sgc\x40msg', 'latin1'))).toThrow(CorruptValueError)
  })

  it('createCache refuses a binary codec without a usable name, and one that returns no bytes is uncacheable', async () => {
    for (const name of ['', 'a b', 'x'.repeat(65), 'é', undefined])
      expect(() => createCache({ ttl: '1m', codec: { ...bytesCodec, name: name as string } })).toThrow(
        InvalidArgumentError,
      )
    const liar = { binary: true, name: 'liar', encode: () => 'text', decode: () => 1 } as unknown as BinaryCodec
    const cache = createCache({ ttl: '1m', codec: liar })
    await expect(cache.set('k', 1)).rejects.toThrow('not a Buffer or Uint8Array')
    await cache.close()
  })
})

describe('compression', () => {
  const big = { rows: rows(1_000) }

  it.each(['brotli', 'gzip', 'deflate'] as const)(
    '%s: smaller, marked, read by a reader that does not compress',
    (algorithm) => {
      const format = compressing(algorithm)
      const data = stored(format, big)
      const plain = Buffer.byteLength(JSON.stringify(big))
      expect(data.subarray(0, 4).toString('latin1')).toBe('\0sgz')
      expect(data.length).toBeLessThan(plain / 5)
      expect(encodedSize(data)).toBe(plain) // what l1.maxBytes counts
      expect(decodeValue(json, data)).toEqual(big)
    },
  )

  it('below minBytes, or when it saves less than 1/8 (random bytes), the value is stored as it is', () => {
    const format = compressing('brotli', 1024)
    expect(compressed(format, '{"a":1}')).toBe('{"a":1}')
    const noise = randomBytes(64 * 1024)
    const raw = valueFormat(bytesCodec, resolveCompression(true), MAX)
    const data = stored(raw, noise)
    expect(data.subarray(0, 4).toString('latin1')).toBe('\0sgc')
    expect((decodeValue(raw, data) as Buffer).equals(noise)).toBe(true)
  })

  it('compresses a BinaryValue (an HTTP response) whole', () => {
    const body = Buffer.from('<p>hello</p>'.repeat(5_000))
    const data = stored(compressing('gzip'), new BinaryValue({ status: 200 }, body))
    expect(data.length).toBeLessThan(body.length / 10)
    const back = decodeValue(json, data) as BinaryValue
    expect(back.head).toEqual({ status: 200 })
    expect(back.bytes.equals(body)).toBe(true)
  })

  it('every malformed compressed value is a CorruptValueError, never a crash or an inflation past maxValueBytes', () => {
    const good = stored(compressing('gzip'), big)
    const header = (letter: string, length: number) => {
      const prefix = Buffer.from(`\0sgz${letter}\0\0\0\0`, 'latin1')
      prefix.writeUInt32BE(length, 5)
      return prefix
    }
    const flipped = Buffer.from(good)
    for (let i = 30; i < 50; i++) flipped[i] = flipped[i]! ^ 0xff
    const lying = Buffer.from(good)
    lying.writeUInt32BE(good.readUInt32BE(5) - 1, 5)
    const bomb = Buffer.concat([header('g', 1_000), zlib.gzipSync(Buffer.alloc(10_000_000))])
    const twice = Buffer.concat([header('g', good.length), zlib.gzipSync(good)])
    const cases = {
      truncated: good.subarray(0, 7),
      'cut short': good.subarray(0, good.length - 10),
      flipped,
      'a length that lies': lying,
      'a bomb': bomb,
      'above maxValueBytes': header('g', MAX + 1),
      'an unknown algorithm': Buffer.concat([header('q', 10), Buffer.alloc(10)]),
      'compressed twice': twice,
    }
    for (const [what, data] of Object.entries(cases)) {
      expect(() => decodeValue(json, data), what).toThrow(CorruptValueError)
    }
  })

  it('zstd where Node has it; elsewhere refused at createCache and read as corrupt', () => {
    const zstdValue = Buffer.concat([Buffer.from('\0sgzz\0\0\0\x02', 'latin1'), Buffer.from([1, 2, 3])])
    if (compressionAvailable('zstd')) {
      const format = valueFormat(jsonCodec, resolveCompression({ algorithm: 'zstd', minBytes: 0 }), MAX)
      expect(decodeValue(json, stored(format, big))).toEqual(big)
    } else {
      expect(() => createCache({ ttl: '1m', compression: { algorithm: 'zstd' } })).toThrow(/zstd needs Node 22.15/)
      expect(() => decodeValue(json, zstdValue)).toThrow(/cannot decompress/)
    }
  })

  it('options: each checked with its name', () => {
    expect(resolveCompression(undefined)).toBeUndefined()
    expect(resolveCompression(false)).toBeUndefined()
    expect(resolveCompression(true)).toMatchObject({ algorithm: 'brotli', minBytes: 16_384, level: 4 })
    const bad: [unknown, string][] = [
      [{ algorithm: 'lz4' }, 'compression.algorithm'],
      [{ level: 12 }, 'compression.level'],
      [{ algorithm: 'gzip', level: 0 }, 'compression.level'],
      [{ minBytes: -1 }, 'compression.minBytes'],
      [{ minBytes: 1.5 }, 'compression.minBytes'],
      [{ threshold: 1 }, 'compression.threshold'],
      ['yes', 'compression'],
    ]
    for (const [option, argument] of bad)
      expect(() => createCache({ ttl: '1m', compression: option as never })).toThrow(
        expect.objectContaining({ argument }),
      )
  })
})
