/**
 * The value envelope as each tier sees it: the codec's text (or a BinaryValue's bytes) and its lifetimes.
 *
 * Redis keeps absolute deadlines by its own clock (see scripts/*.lua); a process
 * only ever holds *remaining* lifetimes, turned into deadlines on the local
 * monotonic clock, so clock skew between app servers cannot disagree on freshness.
 */
/**
 * A value whose payload is raw bytes (an HTTP body): stored as those bytes, after a head
 * the codec encodes, instead of base64 inside the codec's text (see stored-value.ts). L1
 * keeps the object as is.
 */
export class BinaryValue<H = unknown> {
  constructor(
    readonly head: H,
    readonly bytes: Buffer,
  ) {}
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
