/**
 * A value's stored form: the `data` of a record (src/cache/redis/record.ts), in Redis and in
 * commit messages alike. One of:
 *
 * - a text codec's text (UTF-8), unmarked: plain JSON is stored byte for byte as JSON.stringify
 *   writes it, and read after a one-byte check;
 * - `\0sgc`, the binary codec's name (its length in one byte, then ASCII), its bytes;
 * - `\0sgb1`, a BinaryValue: its head's length (uint32 BE), its head (either form above), its bytes;
 * - `\0sgz`, the algorithm's letter, the length of what was compressed (uint32 BE), and that
 *   (one of the forms above, never compressed twice) compressed.
 *
 * No codec text starts with NUL (JSON cannot), so the forms never mix. Whatever a reader's own
 * settings, it reads every form: a compressed value is read by a process that does not
 * compress, and a value of another codec is reported (`CodecMismatchError`), never decoded as garbage.
 */
import { isBinaryCodec, type BinaryCodec, type Codec } from './codecs.js'
import { compress, decompress, type Compression } from './compression.js'
import { BinaryValue } from './entry.js'
import { CodecMismatchError, CorruptValueError } from './errors.js'

/** How a cache stores values: resolved once, from `codec`, `compression` and `maxValueBytes`. */
export interface ValueFormat {
  codec: Codec | BinaryCodec
  /** For a binary codec: `\0sgc`, its name's length and its name; undefined for a text codec. */
  binaryHeader: Buffer | undefined
  compression: Compression | undefined
  /** Largest encoded value, in bytes: also the most a compressed value may inflate to. */
  maxValueBytes: number
}

const NUL = 0
const S = 0x73
const G = 0x67
const CODEC_KIND = 0x63 // 'c'
const COMPRESSED_KIND = 0x7a // 'z'
/** `\0sgb1` and the head's length. */
const BINARY_VALUE_MAGIC = Buffer.from('\0sgb1', 'latin1')
const BINARY_VALUE_PREFIX = BINARY_VALUE_MAGIC.length + 4
/** `\0sgz`, the algorithm's letter, the inflated length. */
const COMPRESSED_PREFIX = 4 + 1 + 4
const CODEC_NAME = /^[A-Za-z0-9._-]{1,64}$/

export function valueFormat(
  codec: Codec | BinaryCodec,
  compression: Compression | undefined,
  maxValueBytes: number,
): ValueFormat {
  let binaryHeader: Buffer | undefined
  if (isBinaryCodec(codec)) {
    if (typeof codec.name !== 'string' || !CODEC_NAME.test(codec.name))
      throw new TypeError('a binary codec needs a name of 1 to 64 ASCII letters, digits and ._-')
    binaryHeader = Buffer.concat([Buffer.from([NUL, S, G, CODEC_KIND, codec.name.length]), Buffer.from(codec.name)])
  }
  return { codec, binaryHeader, compression, maxValueBytes }
}

/** The codec's form of `value`: its text, or its bytes after the header naming it. */
function encodeWithCodec(format: ValueFormat, value: unknown): string | Buffer {
  const { codec, binaryHeader } = format
  const encoded: unknown = codec.encode(value)
  if (!binaryHeader) {
    if (typeof encoded !== 'string') throw new TypeError(`the codec returned ${typeof encoded}, not a string`)
    return encoded
  }
  if (!(encoded instanceof Uint8Array))
    throw new TypeError(`the binary codec returned ${typeof encoded}, not a Buffer or Uint8Array`)
  // A copy, always: a codec may hand out a view of a buffer it reuses (msgpackr does).
  return Buffer.concat([binaryHeader, encoded])
}

/** What goes to Redis, before compression (see `compressed`): the codec's form, or a BinaryValue's. */
export function encodeValue(format: ValueFormat, value: unknown): string | Buffer {
  if (!(value instanceof BinaryValue)) return encodeWithCodec(format, value)
  const encodedHead = encodeWithCodec(format, value.head)
  const head = typeof encodedHead === 'string' ? Buffer.from(encodedHead) : encodedHead
  const prefix = Buffer.alloc(BINARY_VALUE_PREFIX)
  BINARY_VALUE_MAGIC.copy(prefix)
  prefix.writeUInt32BE(head.length, BINARY_VALUE_MAGIC.length)
  return Buffer.concat([prefix, head, value.bytes])
}

/**
 * `data` compressed when the format says so and it is at least `minBytes` long, else `data`
 * itself. A compressed form that saves less than 1/8 is dropped: the readers would pay for
 * decompressing it and gain nothing.
 */
export function compressed(format: ValueFormat, data: string | Buffer): string | Buffer {
  const compression = format.compression
  // A UTF-16 unit is 1 to 3 UTF-8 bytes: too short for certain without counting bytes.
  if (!compression || data.length * (typeof data === 'string' ? 3 : 1) < compression.minBytes) return data
  const bytes = typeof data === 'string' ? Buffer.from(data) : data
  if (bytes.length < compression.minBytes) return data
  const packed = compress(compression, bytes)
  if (packed.length + COMPRESSED_PREFIX > bytes.length - bytes.length / 8) return data
  const prefix = Buffer.from([NUL, S, G, COMPRESSED_KIND, compression.letter, 0, 0, 0, 0])
  prefix.writeUInt32BE(bytes.length, 5)
  return Buffer.concat([prefix, packed])
}

/** Does a marked form of `kind` start at `from`? */
function marked(data: Buffer, from: number, kind: number): boolean {
  return data[from] === NUL && data[from + 1] === S && data[from + 2] === G && data[from + 3] === kind
}

/**
 * The inverse of encodeValue and compressed, from the bytes Redis holds (`data` from `from`
 * on). Throws on data it cannot decode: the codec's own error, `CorruptValueError`, or
 * `CodecMismatchError`. This is on every hit: plain text takes one byte's check.
 */
export function decodeValue(format: ValueFormat, data: Buffer, from = 0): unknown {
  if (data[from] !== NUL) return decodeCodecForm(format, data, from, data.length)
  if (!marked(data, from, COMPRESSED_KIND)) return decodeUncompressed(format, data, from)
  const inflated = inflate(format, data, from)
  if (marked(inflated, 0, COMPRESSED_KIND)) throw new CorruptValueError('a compressed value compressed again')
  return decodeUncompressed(format, inflated, 0)
}

/** What `l1.maxBytes` counts of a value as stored: its length before compression (a string's in UTF-16 units). */
export function storedSize(data: string | Buffer): number {
  return typeof data === 'string' ? data.length : encodedSize(data)
}

/** The length of the encoded value (what `l1.maxBytes` counts): before compression, if compressed. */
export function encodedSize(data: Buffer, from = 0): number {
  return marked(data, from, COMPRESSED_KIND) && data.length - from >= COMPRESSED_PREFIX
    ? data.readUInt32BE(from + 5)
    : data.length - from
}

function decodeUncompressed(format: ValueFormat, data: Buffer, from: number): unknown {
  if (!(data.length - from >= BINARY_VALUE_PREFIX && data.compare(BINARY_VALUE_MAGIC, 0, 5, from, from + 5) === 0))
    return decodeCodecForm(format, data, from, data.length)
  const headAt = from + BINARY_VALUE_PREFIX
  const headEnd = headAt + data.readUInt32BE(from + BINARY_VALUE_MAGIC.length)
  if (headEnd > data.length) throw new CorruptValueError('a binary value truncated in its head')
  return new BinaryValue(decodeCodecForm(format, data, headAt, headEnd), data.subarray(headEnd))
}

/** The codec's form in `data` from `from` to `end`: text, or a binary codec's marked bytes. */
function decodeCodecForm(format: ValueFormat, data: Buffer, from: number, end: number): unknown {
  const { codec, binaryHeader } = format
  if (!marked(data, from, CODEC_KIND)) {
    if (binaryHeader) throw new CodecMismatchError('a text codec', describe(format))
    return (codec as Codec).decode(data.toString('utf8', from, end))
  }
  const nameEnd = from + 5 + (data[from + 4] ?? 0)
  if (nameEnd > end) throw new CorruptValueError('a binary codec value truncated in its name')
  if (!binaryHeader || data.compare(binaryHeader, 0, binaryHeader.length, from, nameEnd) !== 0)
    throw new CodecMismatchError(`the binary codec "${data.toString('latin1', from + 5, nameEnd)}"`, describe(format))
  return (codec as BinaryCodec).decode(data.subarray(nameEnd, end))
}

function describe(format: ValueFormat): string {
  return format.binaryHeader ? `the binary codec "${(format.codec as BinaryCodec).name}"` : 'a text codec'
}

/** The compressed form at `from` inflated, within `maxValueBytes`; CorruptValueError when it cannot be. */
function inflate(format: ValueFormat, data: Buffer, from: number): Buffer {
  if (data.length - from < COMPRESSED_PREFIX) throw new CorruptValueError('a compressed value truncated in its header')
  const letter = data[from + 4]!
  const length = data.readUInt32BE(from + 5)
  if (length > format.maxValueBytes)
    throw new CorruptValueError(`a compressed value of ${length} bytes, above maxValueBytes (${format.maxValueBytes})`)
  let inflated: Buffer
  try {
    inflated = decompress(letter, data.subarray(from + COMPRESSED_PREFIX), length)
  } catch (error) {
    throw new CorruptValueError(`a compressed value that cannot be decompressed: ${(error as Error).message}`, error)
  }
  if (inflated.length !== length)
    throw new CorruptValueError(`a compressed value of ${inflated.length} bytes, not the ${length} its header says`)
  return inflated
}
