import { validateHeaderName, validateHeaderValue, type OutgoingHttpHeaders } from 'node:http'

/** What Node's writeHead refuses in a reason phrase (its checkInvalidHeaderChar). */
export const INVALID_REASON = /[^\t\x20-\x7e\x80-\xff]/

/** A header value as Node's `ServerResponse` holds it. */
export type HeaderValue = string | number | readonly string[]

/** Headers in a JSON-friendly form: `[name as written, value]`, one pair per field name. */
export type HeaderList = Array<[name: string, value: string | string[]]>

/**
 * Response headers with the semantics of Node's `ServerResponse` header API:
 * case-insensitive names, the name's spelling kept as first set, values as given.
 * The capture writes the handler's headers here instead of into the live response.
 */
export class HeaderMap {
  private readonly fields = new Map<string, { name: string; value: HeaderValue }>()

  static from(headers: OutgoingHttpHeaders | HeaderList): HeaderMap {
    const map = new HeaderMap()
    const pairs = Array.isArray(headers) ? headers : Object.entries(headers)
    for (const [name, value] of pairs) {
      if (value !== undefined) map.fields.set(name.toLowerCase(), { name, value: copy(value) })
    }
    return map
  }

  /** Like `res.setHeader`: validates, replaces. */
  set(name: string, value: HeaderValue): void {
    validateHeaderName(name)
    validateHeaderValue(name, value as string) // Node checks arrays and numbers too
    const lower = name.toLowerCase()
    this.fields.set(lower, { name: this.fields.get(lower)?.name ?? name, value: copy(value) })
  }

  /** Like `res.appendHeader`: adds values after the existing ones. */
  append(name: string, value: HeaderValue): void {
    validateHeaderName(name)
    validateHeaderValue(name, value as string) // Node checks arrays and numbers too
    const existing = this.fields.get(name.toLowerCase())
    if (!existing) return this.set(name, value)
    existing.value = [...asArray(existing.value), ...asArray(value)]
  }

  get(name: string): HeaderValue | undefined {
    return this.fields.get(name.toLowerCase())?.value
  }

  has(name: string): boolean {
    return this.fields.has(name.toLowerCase())
  }

  delete(name: string): void {
    this.fields.delete(name.toLowerCase())
  }

  /** Lower-case names, as `res.getHeaderNames()` returns them. */
  names(): string[] {
    return [...this.fields.keys()]
  }

  /** A null-prototype object with lower-case names, as `res.getHeaders()` returns it. */
  toObject(): OutgoingHttpHeaders {
    const out: OutgoingHttpHeaders = Object.create(null)
    for (const [lower, { value }] of this.fields) out[lower] = copy(value) as OutgoingHttpHeaders[string]
    return out
  }

  toList(): HeaderList {
    return [...this.fields.values()].map(({ name, value }) => [
      name,
      typeof value === 'number' ? String(value) : (copy(value) as string | string[]),
    ])
  }
}

function copy(value: HeaderValue): HeaderValue {
  return Array.isArray(value) ? [...(value as readonly string[])] : value
}

function asArray(value: HeaderValue): string[] {
  return Array.isArray(value) ? [...(value as readonly string[])] : [String(value)]
}

/** One header of a list, comma-joined when it has several values; undefined when absent. */
export function headerOf(headers: HeaderList, name: string): string | undefined {
  const lower = name.toLowerCase()
  const found = headers.find(([n]) => n.toLowerCase() === lower)
  if (!found) return undefined
  return Array.isArray(found[1]) ? found[1].join(', ') : found[1]
}

/** Comma-separated tokens of a header, lower-cased and trimmed, e.g. Vary or Connection. */
export function tokensOf(value: string | undefined): string[] {
  if (!value) return []
  return value
    .split(',')
    .map((token) => token.trim().toLowerCase())
    .filter(Boolean)
}

/** Fixed hop-by-hop fields (RFC 9110 §7.6.1); `Proxy-*` is matched by prefix. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer'])

/**
 * Drops hop-by-hop headers: they describe one connection, never the stored response
 * (RFC 9111 §3.1). That is the fixed set, every `Proxy-*` field, and whatever
 * `Connection` itself names.
 */
export function withoutHopByHop(headers: HeaderList): HeaderList {
  const named = new Set(tokensOf(headerOf(headers, 'connection')))
  return headers.filter(([name]) => {
    const lower = name.toLowerCase()
    return !HOP_BY_HOP.has(lower) && !lower.startsWith('proxy-') && !named.has(lower)
  })
}

/** `headers` without the named fields (case-insensitive). */
export function withoutFields(headers: HeaderList, names: readonly string[]): HeaderList {
  const drop = new Set(names.map((name) => name.toLowerCase()))
  return headers.filter(([name]) => !drop.has(name.toLowerCase()))
}

/** IMF-fixdate, and the two obsolete forms recipients must accept (RFC 9110 §5.6.7). */
const HTTP_DATE = [
  /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/, // Sun, 06 Nov 1994 08:49:37 GMT
  /^[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/, // Sunday, 06-Nov-94 08:49:37 GMT
  /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/, // Sun Nov  6 08:49:37 1994
]

/** An HTTP-date in ms since the epoch, or NaN. Stricter than Date.parse, which reads "0" as the year 2000. */
export function parseHttpDate(value: string | undefined, now = Date.now()): number {
  if (value === undefined) return Number.NaN
  const text = value.trim()
  const form = HTTP_DATE.findIndex((pattern) => pattern.test(text))
  if (form === -1) return Number.NaN
  const at = Date.parse(/GMT$/.test(text) ? text : `${text} GMT`)
  return form === 1 ? rfc850Year(at, now) : at
}

/**
 * RFC 850 dates have two-digit years: one that reads as more than 50 years in the future
 * is the most recent past year with those digits (RFC 9110 §5.6.7). `Date.parse` reads
 * `18-Aug-50` as 1950; in 2026 it is 2050, and `18-Aug-80` is 1980.
 */
function rfc850Year(parsed: number, now: number): number {
  if (Number.isNaN(parsed)) return parsed
  const date = new Date(parsed)
  const nowYear = new Date(now).getUTCFullYear()
  let year = Math.floor(nowYear / 100) * 100 + (date.getUTCFullYear() % 100)
  if (year > nowYear + 50) year -= 100
  date.setUTCFullYear(year)
  return date.getTime()
}
