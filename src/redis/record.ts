import type { Lifetimes } from '../entry.js'

/**
 * The stored form of a committed value, written by commit.lua (and restored by
 * get-or-lock.lua) as the fresh copy `<ns>:{tag}:v` and published after `c|<now>|`:
 *
 *   x|s|e|l|t|f|data
 *
 * x, s, e: fresh-, grace- and fallback-until in server ms; l: load ms; t: ttl ms;
 * f: the fencing token it was written with (its version); data: the codec's text.
 */
export interface StoredRecord {
  life: Lifetimes
  version: string
  data: string
}

const FIELDS = 6

/**
 * Reads a record starting at `at`, with deadlines made relative to `serverNow`.
 * Undefined when malformed: the caller treats it as corrupt (a miss).
 */
export function parseRecord(text: string, at: number, serverNow: number): StoredRecord | undefined {
  const numbers: number[] = []
  let version = ''
  for (let i = 0; i < FIELDS; i++) {
    const bar = text.indexOf('|', at)
    if (bar < 0) return undefined
    if (i === FIELDS - 1) {
      version = text.slice(at, bar)
    } else {
      const n = Number(text.slice(at, bar))
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
    data: text.slice(at),
  }
}

/** Is fencing token `a` newer than `b`? Tokens are decimal integers ('' is older than any). */
export function newerVersion(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b
}
