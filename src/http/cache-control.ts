import { MAX_LIFETIME_MS } from '../duration.js'
import { parseHttpDate } from './headers.js'

/**
 * `Cache-Control` parsing and the freshness rules the middleware takes from a response
 * (RFC 9111 §4.2.1, §5.2.2; RFC 5861).
 */

/** Directive name (lower case) → argument, or `true` for a directive without one. */
export type Directives = Map<string, string | true>

/**
 * Parses `Cache-Control` (all field lines joined). Names are case-insensitive; quoted
 * arguments may contain commas (`no-cache="Set-Cookie, Foo"`). Strict where the grammar
 * is (`token [ "=" ( token / quoted-string ) ]`, RFC 9111 §5.2): no whitespace around
 * `=`, so `max-age =3600` is an unknown directive and `max-age= 3600` a malformed one.
 */
export function parseCacheControl(value: string | undefined): Directives {
  const directives: Directives = new Map()
  if (!value) return directives
  let at = 0
  const skip = (chars: string) => {
    while (at < value.length && chars.includes(value[at]!)) at++
  }
  while (at < value.length) {
    skip(', \t')
    const nameStart = at
    while (at < value.length && value[at] !== '=' && value[at] !== ',') at++
    const rawName = value.slice(nameStart, at)
    let name = rawName.trim().toLowerCase()
    // Whitespace inside a name, or before its `=`, is not a directive of the grammar.
    if (/\s/.test(name) || (value[at] === '=' && rawName !== rawName.trimEnd())) name = ''
    let argument: string | true = true
    if (value[at] === '=') {
      at++
      if (value[at] === '"') {
        argument = ''
        for (at++; at < value.length && value[at] !== '"'; at++) {
          if (value[at] === '\\' && at + 1 < value.length) at++
          argument += value[at]
        }
        while (at < value.length && value[at] !== ',') at++ // past the closing quote
      } else {
        const argumentStart = at
        while (at < value.length && value[at] !== ',') at++
        argument = value.slice(argumentStart, at).trimEnd() // leading whitespace stays: malformed
      }
    }
    // The first occurrence wins, as in most caches; duplicates are invalid anyway.
    if (name && !directives.has(name)) directives.set(name, argument)
  }
  return directives
}

/**
 * A delta-seconds argument (`max-age=60`, or its quoted form `max-age="60"`) in ms, or
 * undefined when absent or malformed. Capped at the longest lifetime the cache stores, as
 * RFC 9111 §1.2.2 allows for values too large to represent.
 */
export function deltaSeconds(directives: Directives, name: string): number | undefined {
  const argument = directives.get(name)
  if (typeof argument !== 'string' || !/^\d+$/.test(argument)) return undefined
  return Math.min(Number(argument) * 1000, MAX_LIFETIME_MS)
}

/**
 * A freshness directive's lifetime in ms: undefined when absent, 0 when present but
 * invalid (`max-age=abc`, `-1`, `1.5`, `'60'`, no argument): invalid freshness
 * information means stale (RFC 9111 §4.2.1), as an invalid `Expires` does.
 */
function freshnessDirective(directives: Directives, name: string): number | undefined {
  if (!directives.has(name)) return undefined
  return deltaSeconds(directives, name) ?? 0
}

/** Does the response forbid serving it stale (RFC 9111 §4.2.4)? `s-maxage` implies `proxy-revalidate`. */
export function forbidsStale(directives: Directives): boolean {
  return directives.has('must-revalidate') || directives.has('proxy-revalidate') || directives.has('s-maxage')
}

/**
 * The response's own freshness lifetime for a shared cache, in ms:
 * `s-maxage` > `max-age` > `Expires − Date`. Undefined when it states none.
 * A malformed `Expires`, `max-age` or `s-maxage` means "already expired" (RFC 9111 §4.2.1, §5.3).
 */
export function responseLifetime(
  directives: Directives,
  expires: string | undefined,
  date: string | undefined,
  now: number,
): number | undefined {
  const shared = freshnessDirective(directives, 's-maxage')
  if (shared !== undefined) return shared
  const maxAge = freshnessDirective(directives, 'max-age')
  if (maxAge !== undefined) return maxAge
  if (expires === undefined) return undefined
  const expiresAt = parseHttpDate(expires)
  if (Number.isNaN(expiresAt)) return 0
  const dateAt = parseHttpDate(date)
  return expiresAt - (Number.isNaN(dateAt) ? now : dateAt)
}
