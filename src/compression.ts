import zlib from 'node:zlib'
import { InvalidArgumentError } from './errors.js'

/*
 * Compression of stored values above a size: what the option means, and the codecs of
 * node:zlib behind it. Synchronous, as decoding is (a hit decodes inside its Redis reply's
 * reaction); bounded on the way out, so corrupt or planted data cannot inflate past it.
 */

/** `'zstd'` needs a Node with `zlib.zstdCompressSync` (22.15 / 23.8 and later). */
export type CompressionAlgorithm = 'brotli' | 'gzip' | 'deflate' | 'zstd'

/** Compression of large values (see docs/codecs.md). */
export interface CompressionOptions {
  /**
   * `'brotli'` (quality 4: about 20% smaller than gzip on JSON, decompressed as fast),
   * `'gzip'`, `'deflate'` (raw), or `'zstd'` where Node has it (22.15 / 23.8 and later;
   * elsewhere `createCache` throws `InvalidArgumentError`). Default `'brotli'`.
   */
  algorithm?: CompressionAlgorithm
  /**
   * Encoded values of at least this many bytes are compressed; smaller ones are stored as they
   * are. A compressed form that saves less than 1/8 is dropped, and the value stored as it is
   * (an HTTP body already gzipped, a JPEG). Default `16384` (16 KiB).
   */
  minBytes?: number
  /**
   * The algorithm's level: brotli 0–11 (default 4), gzip and deflate 1–9 (default 6), zstd
   * 1–19 (default 3). Higher is smaller and slower to compress; decompression costs about
   * the same at every level.
   */
  level?: number
}

/** Default of `compression.minBytes`: 16 KiB. */
export const DEFAULT_COMPRESSION_MIN_BYTES = 16 * 1024

/** The letter each algorithm is marked with in a stored value. */
const LETTERS = { brotli: 'b', gzip: 'g', deflate: 'd', zstd: 'z' } as const
const LEVELS = { brotli: [0, 11, 4], gzip: [1, 9, 6], deflate: [1, 9, 6], zstd: [1, 19, 3] } as const

interface ZstdZlib {
  zstdCompressSync(data: Buffer, options?: object): Buffer
  zstdDecompressSync(data: Buffer, options?: object): Buffer
  constants: { ZSTD_c_compressionLevel?: number }
}

/** node:zlib's zstd, where this Node has it (undefined on Node 20 and 22 before 22.15). */
function zstdOf(): ZstdZlib | undefined {
  const candidate = zlib as unknown as Partial<ZstdZlib>
  return typeof candidate.zstdCompressSync === 'function' && typeof candidate.zstdDecompressSync === 'function'
    ? (candidate as ZstdZlib)
    : undefined
}

/** Can this Node compress and decompress with `algorithm`? */
export function compressionAvailable(algorithm: CompressionAlgorithm): boolean {
  return algorithm !== 'zstd' || zstdOf() !== undefined
}

/** `compression` resolved: what to compress and how. */
export interface Compression {
  algorithm: CompressionAlgorithm
  /** The byte it is marked with in a stored value. */
  letter: number
  minBytes: number
  level: number
}

/** Resolves the `compression` option; undefined when off. */
export function resolveCompression(option: CompressionOptions | boolean | undefined): Compression | undefined {
  if (option === undefined || option === false) return undefined
  const given: CompressionOptions = option === true ? {} : option
  if (typeof given !== 'object' || given === null)
    throw new InvalidArgumentError('compression', 'must be true, false or { algorithm, minBytes, level }')
  for (const name of Object.keys(given))
    if (name !== 'algorithm' && name !== 'minBytes' && name !== 'level')
      throw new InvalidArgumentError(`compression.${name}`, 'unknown option')
  const algorithm = given.algorithm ?? 'brotli'
  if (!Object.hasOwn(LETTERS, algorithm))
    throw new InvalidArgumentError('compression.algorithm', `must be brotli, gzip, deflate or zstd, got ${algorithm}`)
  if (!compressionAvailable(algorithm))
    throw new InvalidArgumentError(
      'compression.algorithm',
      `zstd needs Node 22.15 or 23.8 and later (zlib.zstdCompressSync); this is ${process.version}`,
    )
  const [lowest, highest, defaultLevel] = LEVELS[algorithm]
  const level = given.level ?? defaultLevel
  if (!Number.isInteger(level) || level < lowest || level > highest)
    throw new InvalidArgumentError(
      'compression.level',
      `must be an integer in [${lowest}, ${highest}] for ${algorithm}`,
    )
  const minBytes = given.minBytes ?? DEFAULT_COMPRESSION_MIN_BYTES
  if (!Number.isInteger(minBytes) || minBytes < 0)
    throw new InvalidArgumentError('compression.minBytes', `must be a non-negative integer, got ${String(minBytes)}`)
  return { algorithm, letter: LETTERS[algorithm].charCodeAt(0), minBytes, level }
}

/** `data` compressed as `compression` says. */
export function compress(compression: Compression, data: Buffer): Buffer {
  const { algorithm, level } = compression
  switch (algorithm) {
    case 'brotli':
      return zlib.brotliCompressSync(data, {
        params: {
          [zlib.constants.BROTLI_PARAM_QUALITY]: level,
          [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length,
        },
      })
    case 'gzip':
      return zlib.gzipSync(data, { level })
    case 'deflate':
      return zlib.deflateRawSync(data, { level })
    case 'zstd': {
      const zstd = zstdOf()!
      const levelParam = zstd.constants.ZSTD_c_compressionLevel
      return zstd.zstdCompressSync(data, levelParam === undefined ? {} : { params: { [levelParam]: level } })
    }
  }
}

/**
 * The inverse of compress, for the algorithm marked by `letter`, giving at most `maxBytes`:
 * throws (a RangeError from zlib, or an Error) on corrupt data, on more than `maxBytes`, and
 * on zstd where this Node has none.
 */
export function decompress(letter: number, data: Buffer, maxBytes: number): Buffer {
  const options = { maxOutputLength: Math.max(1, maxBytes) }
  switch (String.fromCharCode(letter)) {
    case LETTERS.brotli:
      return zlib.brotliDecompressSync(data, options)
    case LETTERS.gzip:
      return zlib.gunzipSync(data, options)
    case LETTERS.deflate:
      return zlib.inflateRawSync(data, options)
    case LETTERS.zstd: {
      const zstd = zstdOf()
      if (!zstd) throw new Error(`compressed with zstd, which this Node (${process.version}) cannot decompress`)
      return zstd.zstdDecompressSync(data, options)
    }
    default:
      throw new Error(`compressed with an unknown algorithm (${JSON.stringify(String.fromCharCode(letter))})`)
  }
}
