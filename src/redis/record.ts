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

const FIELDS = 6
const BAR = 0x7c // '|'

/**
 * Reads a record starting at `at`, with deadlines made relative to `serverNow`.
 * Undefined when malformed: the caller treats it as corrupt (a miss).
 */
export function parseRecord(bytes: Buffer, at: number, serverNow: number): StoredRecord | undefined {
  const numbers: number[] = []
  let version = ''
  for (let i = 0; i < FIELDS; i++) {
    const bar = bytes.indexOf(BAR, at)
    if (bar < 0) return undefined
    const field = bytes.toString('latin1', at, bar) // the header is ASCII
    if (i === FIELDS - 1) {
      version = field
    } else {
      const n = Number(field)
      if (!Number.isFinite(n) || bar === at) return undefined
      numbers.push(n)
    }
    at = bar + 1
  }
  const [x, s, e, loadMs, ttlMs] = numbers as [number, number, number, number, number]
  if (!(x <= s && s <= e) || loadMs < 0 || ttlMs < 0 || !/^\d+$/.test(version)) return undefined
  return {
    life: { freshMs: x - serverNow, graceMs: s - serverNow, fallbackMs: e - serverNow, loadMs, ttlMs },
    version,
    data: bytes.subarray(at),
  }
}

/** Is fencing token `a` newer than `b`? Tokens are decimal integers ('' is older than any). */
export function newerVersion(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b
}
