import { MAX_LIFETIME_MS } from '../duration.js'
import type { Lifetimes } from '../entry.js'

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
export interface StoredRecord {
  life: Lifetimes
  version: string
  /** The value as stored (see encodeValue): bytes, since a BinaryValue's payload must not go through UTF-8. */
  data: Buffer
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
  const numbers = [0, 0, 0, 0, 0]
  let versionAt = 0
  for (let field = 0; field < 6; field++) {
    const start = at
    let n = 0
    for (let code = bytes[at] ?? 0; code >= 48 && code <= 57; code = bytes[++at] ?? 0) n = n * 10 + (code - 48)
    // Each field is a non-empty run of digits ending in '|', and exact (below 2^53): planted
    // digits cannot make an entry fresh for ever.
    if (at === start || bytes[at] !== 124 || !Number.isSafeInteger(n)) return undefined
    if (field < 5) numbers[field] = n
    else versionAt = start
    at++
  }
  const [x, s, e, loadMs, ttlMs] = numbers as [number, number, number, number, number]
  // No load time or ttl is longer than the options accept (the scripts check the same).
  if (!(x <= s && s <= e) || loadMs > MAX_LIFETIME_MS || ttlMs > MAX_LIFETIME_MS) return undefined
  // The fresh copy lives while fresh (PX = x − now), and never fresher than its ttl: one past
  // its x, or fresh for longer than t, lost its expiry or was planted. It would be served for ever.
  // A t of 0 is no exception: commit.lua writes no fresh copy for it, and its commit message has x = now.
  if (x < serverNow - CLOCK_ESTIMATE_SLACK_MS || x - serverNow > ttlMs + CLOCK_ESTIMATE_SLACK_MS) return undefined
  return {
    life: { freshMs: x - serverNow, graceMs: s - serverNow, fallbackMs: e - serverNow, loadMs, ttlMs },
    version: bytes.toString('latin1', versionAt, at - 1),
    data: bytes.subarray(at),
  }
}

/** Is fencing token `a` newer than `b`? Tokens are decimal integers ('' is older than any). */
export function newerVersion(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b
}
