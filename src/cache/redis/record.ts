import { MAX_LIFETIME_MS } from '../../duration.js'
import type { Lifetimes } from '../../entry.js'

/**
 * The stored form of a committed value, written by commit.lua (and restored by
 * get-or-lock.lua) as the fresh copy `<ns>:{tag}:v` and published after `c|<now>|`:
 *
 *   x|s|e|l|t|f|data
 *
 * x, s, e: fresh-, grace- and fallback-until in server ms; l: load ms; t: ttl ms;
 * f: the fencing token it was written with (its version); data: the value as encodeValue
 * wrote it (the codec's text, or a BinaryValue's head and bytes).
 */
export class StoredRecord {
  constructor(
    /** What the record was read from, and where in it its fields start. */
    readonly bytes: Buffer,
    private readonly versionAt: number,
    /** Where the value starts in `bytes`. */
    readonly dataAt: number,
    /** Fresh-, grace- and fallback-until, in server ms. */
    readonly x: number,
    readonly s: number,
    readonly e: number,
    readonly loadMs: number,
    readonly ttlMs: number,
  ) {}

  /** The fencing token it was written with (its version); read only when asked (not by a plain hit). */
  get version(): string {
    return this.bytes.toString('latin1', this.versionAt, this.dataAt - 1)
  }

  /** The value as stored (see encodeValue): bytes, since a BinaryValue's payload must not go through UTF-8. */
  get data(): Buffer {
    return this.bytes.subarray(this.dataAt)
  }
}

/**
 * How far a process's estimate of the server clock may be off (ServerClock: half a round
 * trip, taken every minute) before a record's deadlines count as impossible.
 */
const CLOCK_ESTIMATE_SLACK_MS = 10_000

/**
 * Reads a record starting at `at`, with deadlines made relative to `serverNow`.
 * Undefined when malformed: the caller treats it as corrupt (a miss). This is on every
 * fresh hit, so it scans the digits itself rather than slicing and converting.
 */
export function parseRecord(bytes: Buffer, at: number, serverNow: number): StoredRecord | undefined {
  let x = 0
  let s = 0
  let e = 0
  let loadMs = 0
  let ttlMs = 0
  let versionAt = 0
  for (let field = 0; field < 6; field++) {
    const start = at
    let n = 0
    for (let code = bytes[at] ?? 0; code >= 48 && code <= 57; code = bytes[++at] ?? 0) n = n * 10 + (code - 48)
    // Each field is a non-empty run of digits ending in '|', and exact (below 2^53): planted
    // digits cannot make an entry fresh for ever.
    if (at === start || bytes[at] !== 124 || !Number.isSafeInteger(n)) return undefined
    switch (field) {
      case 0:
        x = n
        break
      case 1:
        s = n
        break
      case 2:
        e = n
        break
      case 3:
        loadMs = n
        break
      case 4:
        ttlMs = n
        break
      default:
        versionAt = start
    }
    at++
  }
  // No load time or ttl is longer than the options accept (the scripts check the same).
  if (!(x <= s && s <= e) || loadMs > MAX_LIFETIME_MS || ttlMs > MAX_LIFETIME_MS) return undefined
  // The fresh copy lives while fresh (PX = x − now), and never fresher than its ttl: one past
  // its x, or fresh for longer than t, lost its expiry or was planted. It would be served for ever.
  // A t of 0 is no exception: commit.lua writes no fresh copy for it, and its commit message has x = now.
  if (x < serverNow - CLOCK_ESTIMATE_SLACK_MS || x - serverNow > ttlMs + CLOCK_ESTIMATE_SLACK_MS) return undefined
  return new StoredRecord(bytes, versionAt, at, x, s, e, loadMs, ttlMs)
}

/** A record's deadlines as lifetimes from `serverNow` (server ms). */
export function lifetimesOf(record: StoredRecord, serverNow: number): Lifetimes {
  return {
    freshMs: record.x - serverNow,
    graceMs: record.s - serverNow,
    fallbackMs: record.e - serverNow,
    loadMs: record.loadMs,
    ttlMs: record.ttlMs,
  }
}

/** Is fencing token `a` newer than `b`? Tokens are decimal integers ('' is older than any). */
export function newerVersion(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b
}
