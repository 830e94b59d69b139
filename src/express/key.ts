import { createHash } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { tokensOf } from './headers.js'

/**
 * Cache keys (HTTP-CACHING.md rules 7 and 8).
 *
 * A URL key names one resource: the scheme, the validated `Host` plus the raw path
 * and query, never the method (GET and HEAD share it). Variants of that resource (per `Vary`
 * and `varyOn`) live under secondary keys derived from the URL key; see variantKey().
 */

/** A request as the keying code needs it; Express adds `originalUrl` (the URL before mounting). */
type KeyedRequest = IncomingMessage & { originalUrl?: string }

/** host or IPv4, or an [IPv6] literal, then an optional port. Anything else is not a Host we key on. */
const HOST_PATTERN = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/

/**
 * The request's `Host` header, lower-cased, if it is a syntactically valid host
 * (and in `allowedHosts` when given). Never `X-Forwarded-Host`, and never Express's
 * `req.hostname`, which reads `X-Forwarded-Host` when `trust proxy` is on.
 */
export function validatedHost(req: IncomingMessage, allowedHosts: ReadonlySet<string> | undefined): string | undefined {
  const raw = req.headers.host
  if (typeof raw !== 'string') return undefined
  const host = raw.trim().toLowerCase()
  if (host.length > 261 || !HOST_PATTERN.test(host)) return undefined
  if (allowedHosts && !allowedHosts.has(host)) return undefined
  return host
}

/**
 * Does the request carry a forwarded host that differs from `Host`? Such a request
 * is the classic unkeyed-input poisoning attempt: a handler that builds links from
 * `req.hostname` (trust proxy on) would store the attacker's host under the real
 * one's key. The middleware passes these requests by, uncached.
 */
export function hasForeignForwardedHost(req: IncomingMessage, host: string): boolean {
  const bare = (value: string) => value.replace(/^"|"$/g, '').trim().toLowerCase()
  const claimed: string[] = []
  for (const name of ['x-forwarded-host', 'x-host', 'x-forwarded-server', 'x-original-host']) {
    const value = req.headers[name]
    if (value !== undefined) claimed.push(...tokensOf(Array.isArray(value) ? value.join(',') : value))
  }
  const forwarded = req.headers.forwarded
  if (forwarded) {
    for (const match of forwarded.matchAll(/(?:^|[;,\s])host\s*=\s*("[^"]*"|[^;,\s]*)/gi)) claimed.push(bare(match[1]!))
  }
  return claimed.some((value) => bare(value) !== host)
}

/**
 * The scheme a handler sees: Express's `req.protocol`, which reads `X-Forwarded-Proto`
 * when `trust proxy` is on (so a client may send anything there); the connection's
 * otherwise. Part of the default key.
 */
export function requestScheme(req: IncomingMessage & { protocol?: unknown }): string {
  if (typeof req.protocol === 'string') return req.protocol
  return (req.socket as { encrypted?: boolean } | undefined)?.encrypted ? 'https' : 'http'
}

/**
 * Does `Forwarded` claim a `proto=` other than `scheme`? Express never reads it, so only
 * a handler parsing it itself would see it: passed by, like a foreign forwarded host.
 */
export function hasForeignForwardedProto(req: IncomingMessage, scheme: string): boolean {
  const forwarded = req.headers.forwarded
  if (!forwarded) return false
  for (const match of forwarded.matchAll(/(?:^|[;,\s])proto\s*=\s*("[^"]*"|[^;,\s]*)/gi)) {
    if (match[1]!.replace(/^"|"$/g, '').trim().toLowerCase() !== scheme) return true
  }
  return false
}

/** The URL part of a key: the raw path and query, hashed when it is long (the core bounds key length). */
const LONG_URL = 256

/**
 * What the middleware adds to a key (a hashed URL, a variant) starts with a space: a
 * request-target cannot contain one (`#`, say, it can), and a key part that does is
 * hashed. So no request can name the key of a hashed URL or of a variant.
 */
function keyPart(text: string): string {
  return text.length > LONG_URL || text.includes(' ') ? ` sha256:${digest(text, 43)}` : text
}

/** The default URL key: `url:<host><path?query>`, or `url-https:<host><path?query>` for HTTPS. */
export function defaultUrlKey(req: KeyedRequest, host: string, scheme: 'http' | 'https' = 'http'): string {
  return `${scheme === 'https' ? 'url-https' : 'url'}:${host}${keyPart(req.originalUrl ?? req.url ?? '/')}`
}

/** The key of a route's own `key(req)` function, kept apart from the default keys. */
export function customUrlKey(userKey: string): string {
  if (typeof userKey !== 'string' || userKey === '') throw new TypeError('cacheRoute: key(req) must return a non-empty string')
  return `key:${keyPart(userKey)}`
}

/**
 * The request header value one variant dimension sees: field lines joined, runs of
 * whitespace around commas collapsed. Nothing more: lower-casing or reordering could
 * merge values that a handler treats differently (RFC 9111 §4.1 allows only
 * normalisations known to be equivalent). `null` when absent, distinct from `""`.
 */
export function normalizedHeader(req: IncomingMessage, name: string): string | null {
  const value = req.headers[name]
  if (value === undefined) return null
  const joined = Array.isArray(value) ? value.join(', ') : value
  return joined.trim().replace(/\s*,\s*/g, ', ').replace(/[ \t]+/g, ' ')
}

/**
 * The secondary key of one variant: the URL key, the variant list's generation id,
 * and a digest of the request's values for every header in the list. Credentials
 * (when a route keys on them) enter only through the digest, never in clear.
 */
export function variantKey(urlKey: string, generation: string, headers: readonly string[], req: IncomingMessage): string {
  const values = headers.map((name) => normalizedHeader(req, name))
  return `${urlKey} v${generation}:${digest(JSON.stringify(values), 22)}`
}

/** Lower-case, de-duplicated, sorted header names: one canonical variant list. */
export function canonicalHeaderNames(names: Iterable<string>): string[] {
  return [...new Set([...names].map((name) => name.trim().toLowerCase()).filter(Boolean))].sort()
}

function digest(text: string, length: number): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, length)
}
