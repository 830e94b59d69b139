import { decodeTaggedJson, encodeTaggedJson } from './tagged-json.js'

/** Turns values into strings for Redis and back. Must throw on what it cannot encode. */
export interface Codec {
  encode(value: unknown): string
  decode(text: string): unknown
}

/**
 * Turns values into bytes for Redis and back: stored and published as bytes, never through
 * UTF-8 or base64. Must throw on what it cannot encode. `msgpackCodec()` is one.
 */
export interface BinaryCodec {
  /** Marks it as a codec of bytes. */
  readonly binary: true
  /**
   * Names the format; written (a few bytes) before every value it stores, so that a process
   * reading with another codec reports the value corrupt (`CodecMismatchError`) instead of
   * decoding garbage. 1 to 64 characters of ASCII letters, digits and `._-`; change it when
   * the format changes.
   */
  readonly name: string
  encode(value: unknown): Uint8Array
  /** `bytes` may be a view into a larger Redis reply (a batched read). */
  decode(bytes: Buffer): unknown
}

/** Is `codec` one of bytes? */
export function isBinaryCodec(codec: Codec | BinaryCodec): codec is BinaryCodec {
  return (codec as Partial<BinaryCodec>).binary === true
}

/**
 * The default codec: JSON that also keeps `Date`, `BigInt`, `Map`, `Set`, `NaN`,
 * `±Infinity` and `undefined` in arrays, and refuses what it cannot give back unchanged.
 *
 * - Plain JSON data is stored exactly as `JSON.stringify` writes it and read with a bare
 *   `JSON.parse`. A value with one of the types above is stored as `~` and JSON with small
 *   tags (`{"~d":1767323045678}` for a Date); see docs/codecs.md for the format.
 * - Refused, because JSON would hand other processes a changed copy: class instances (a
 *   `Point` would come back a plain object), typed arrays and Buffers, `RegExp`, objects
 *   with their own `toJSON`, functions, symbols, cycles. Encoding throws; the cache returns
 *   the value to its own callers without storing it, emits `uncacheable` (with the reason
 *   and the key where it is) and, once per cache and reason, a process warning.
 *   `superjsonCodec` (or a codec of your own) stores more.
 * - Unchanged as JSON does it: `-0` is stored as `0` (which `=== -0`); a property whose
 *   value is `undefined` is left out (it reads back as `undefined`); symbol keys are skipped.
 */
export const jsonCodec: Codec = {
  encode: encodeTaggedJson,
  decode: decodeTaggedJson,
}

/** The part of the `superjson` package this codec uses. */
export interface SuperJsonLike {
  stringify(value: unknown): string
  parse(text: string): unknown
}

/**
 * A codec on superjson, which round-trips what JSON changes: `NaN`, `±Infinity`, `-0`,
 * `Date`, `Map`, `Set`, `RegExp`, `BigInt`, typed arrays, `undefined` (in arrays too), `URL`,
 * `Error`, and repeated references. Functions still vanish, and class instances come back
 * as plain objects unless registered with `superjson.registerClass`. Pass the module in, so
 * stampede-guard needs no dependency on it:
 *
 * ```ts
 * import superjson from 'superjson'
 * createCache({ redis, ttl: '5m', codec: superjsonCodec(superjson) })
 * ```
 */
export function superjsonCodec(superjson: SuperJsonLike): Codec {
  if (typeof superjson?.stringify !== 'function' || typeof superjson?.parse !== 'function') {
    throw new TypeError('superjsonCodec needs the superjson module (with stringify and parse)')
  }
  return {
    encode: (value) => superjson.stringify(value),
    decode: (text) => superjson.parse(text),
  }
}
