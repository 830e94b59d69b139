/**
 * The value envelope as each tier sees it: the codec's text (or a BinaryValue's bytes) and its lifetimes.
 *
 * Redis keeps absolute deadlines by its own clock (see scripts/*.lua); a process
 * only ever holds *remaining* lifetimes, turned into deadlines on the local
 * monotonic clock, so clock skew between app servers cannot disagree on freshness.
 */
import type { Codec } from './codecs.js'

/**
 * A value whose payload is raw bytes (an HTTP body): stored as those bytes, after a head
 * the codec encodes, instead of base64 inside the codec's text. L1 keeps the object as is.
 */
export class BinaryValue<H = unknown> {
  constructor(
    readonly head: H,
    readonly bytes: Buffer,
  ) {}
}

/** Starts the Redis form of a BinaryValue: NUL, then "sgb1", then the head's length (uint32 BE). */
const BINARY_MAGIC = Buffer.from('\0sgb1', 'latin1')
const BINARY_PREFIX = BINARY_MAGIC.length + 4

/** What goes to Redis: the codec's text, or for a BinaryValue the magic, its head's length, the head and the bytes. */
export function encodeValue(codec: Codec, value: unknown): string | Buffer {
  if (!(value instanceof BinaryValue)) return codec.encode(value)
  const head = Buffer.from(codec.encode(value.head))
  const prefix = Buffer.alloc(BINARY_PREFIX)
  BINARY_MAGIC.copy(prefix)
  prefix.writeUInt32BE(head.length, BINARY_MAGIC.length)
  return Buffer.concat([prefix, head, value.bytes])
}

/** Does `data` start with BINARY_MAGIC at `from` (compared in place: this is on every hit)? */
function isBinaryValue(data: Buffer, from: number): boolean {
  if (data.length - from < BINARY_PREFIX) return false
  for (let i = 0; i < BINARY_MAGIC.length; i++) if (data[from + i] !== BINARY_MAGIC[i]) return false
  return true
}

/** The inverse of encodeValue, from the bytes Redis holds (those of `data` from `from` on). */
export function decodeValue(codec: Codec, data: Buffer, from = 0): unknown {
  if (!isBinaryValue(data, from)) return codec.decode(data.toString('utf8', from))
  const headAt = from + BINARY_PREFIX
  const headEnd = headAt + data.readUInt32BE(from + BINARY_MAGIC.length)
  if (headEnd > data.length) throw new RangeError('truncated binary value')
  return new BinaryValue(codec.decode(data.toString('utf8', headAt, headEnd)), data.subarray(headEnd))
}

/** Remaining lifetimes of an entry, in ms from "now" as Redis saw it. */
export interface Lifetimes {
  /** Fresh for this long. */
  freshMs: number
  /** Served stale at once (grace) until this long from now. */
  graceMs: number
  /** Kept as a fail-safe fallback until this long from now. */
  fallbackMs: number
  /** How long the load that produced it took (XFetch's δ). */
  loadMs: number
  /** The ttl it was stored with (early refresh thresholds are a fraction of it). */
  ttlMs: number
}

/** A value with deadlines on the local monotonic clock (`performance.now()`). */
export interface Entry<V = unknown> {
  value: V
  freshUntil: number
  graceUntil: number
  fallbackUntil: number
  loadMs: number
  ttlMs: number
  /** Fail-safe backoff: until then the stale value is served and no load is tried. */
  backoffUntil: number
  /** The fencing token it was stored with in Redis ('' when unknown): a larger one is newer. */
  version: string
  /** Length of its encoded form: what it counts against `l1.maxBytes`. */
  size: number
}

/** `version` and `size`: the entry's Redis version and encoded length (see Entry). */
export function entryFrom<V>(value: V, life: Lifetimes, now: number, version = '', size = 0): Entry<V> {
  return {
    value,
    freshUntil: now + life.freshMs,
    graceUntil: now + life.graceMs,
    fallbackUntil: now + life.fallbackMs,
    loadMs: life.loadMs,
    ttlMs: life.ttlMs,
    backoffUntil: 0,
    version,
    size,
  }
}

/** Is a stale fallback still usable at `now`? */
export function fallbackValid(entry: Entry | undefined, now: number): entry is Entry {
  return entry !== undefined && now < entry.fallbackUntil
}
