import { createHash } from 'node:crypto'
import { reducedAcceptEncoding } from './accept-encoding.js'
import { headerValue, type HttpHeaders } from './request.js'

/**
 * Cache keys (docs/express.md, rules 7 and 8).
 *
 * A URL key names one resource: the scheme, the validated `Host` plus the raw path
 * and query, never the method (GET and HEAD share it). Variants of that resource (per `Vary`
 * and `varyOn`) live under secondary keys derived from the URL key; see variantKey().
 */

/** A request as the keying code needs it: its header fields. */
type KeyedRequest = { headers: HttpHeaders }

/** host or IPv4, or an [IPv6] literal, then an optional port. Anything else is not a Host we key on. */
const HOST_PATTERN =
  /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/

/**
 * The request's `Host` header, lower-cased, if it is a syntactically valid host
 * (and in `allowedHosts` when given). Never `X-Forwarded-Host`, and never Express's
 * `req.hostname`, which reads `X-Forwarded-Host` when `trust proxy` is on.
 */
export function validatedHost(req: KeyedRequest, allowedHosts: ReadonlySet<string> | undefined): string | undefined {
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
export function hasForeignForwardedHost(req: KeyedRequest, host: string): boolean {
  // Compared as spelled: a handler reading it (req.hostname) sees `SHOP.TEST`, not `shop.test`.
  const claimed: string[] = []
  for (const name of ['x-forwarded-host', 'x-host', 'x-forwarded-server', 'x-original-host']) {
    const value = req.headers[name]
    if (value !== undefined)
      claimed.push(...(Array.isArray(value) ? value.join(',') : value).split(',').filter((v) => v.trim()))
  }
  const forwarded = headerValue(req.headers, 'forwarded')
  if (forwarded) {
    for (const match of forwarded.matchAll(/(?:^|[;,\s])host\s*=\s*("[^"]*"|[^;,\s]*)/gi)) claimed.push(bare(match[1]!))
  }
  return claimed.some((value) => bare(value) !== host)
}

/** A claimed host without its quotes and spaces. */
function bare(value: string): string {
  return value.replace(/^"|"$/g, '').trim()
}

/**
 * Does `Forwarded` claim a `proto=` other than `scheme`? Express never reads it, so only
 * a handler parsing it itself would see it: passed by, like a foreign forwarded host.
 */
export function hasForeignForwardedProto(req: KeyedRequest, scheme: string): boolean {
  const forwarded = headerValue(req.headers, 'forwarded')
  if (!forwarded) return false
  for (const match of forwarded.matchAll(/(?:^|[;,\s])proto\s*=\s*("[^"]*"|[^;,\s]*)/gi)) {
    if (match[1]!.replace(/^"|"$/g, '').trim().toLowerCase() !== scheme) return true
  }
  return false
}

/**
 * Is this request header one of the reverse-proxy family a handler may reflect into the
 * page (links, redirects, "secure" flags)? Every `X-Forwarded-*` but `-For` (per client,
 * see docs) and `-Host` (checked against `Host`, see hasForeignForwardedHost), plus
 * `Forwarded`, `Front-End-Https`, `X-Url-Scheme` and the original-URL fields rewriting
 * proxies send (`X-Original-URL`, `X-Original-URI`, `X-Rewrite-URL`: IIS, nginx ingress),
 * which a handler may reflect as its own address.
 */
const PROXY_FIELDS = new Set([
  'forwarded',
  'front-end-https',
  'x-url-scheme',
  'x-original-url',
  'x-original-uri',
  'x-rewrite-url',
])

function isForwardedField(name: string): boolean {
  if (name.startsWith('x-forwarded-')) return name !== 'x-forwarded-for' && name !== 'x-forwarded-host'
  return PROXY_FIELDS.has(name)
}

/**
 * The key part for the reverse-proxy headers a request carries, `''` when it carries none.
 * Keyed whether or not the app trusts the proxy: a handler may read them itself, and a
 * proxy sends the same values on every request (one entry), while a forged value only
 * ever reaches its own key. `Forwarded` is keyed without its `for=` (the client address);
 * an `X-Forwarded-Proto` the app trusted (the request's scheme says the same) is left to the scheme.
 */
export function forwardedKeyPart(req: KeyedRequest, scheme: string): string {
  const fields: Array<[string, string]> = []
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || !isForwardedField(name)) continue
    let text = Array.isArray(value) ? value.join(', ') : value
    // Trusted (trust proxy on), X-Forwarded-Proto is the request's scheme, keyed as the scheme already.
    if (name === 'x-forwarded-proto' && text.split(',')[0]!.trim().toLowerCase() === scheme) continue
    if (name === 'forwarded') text = text.replace(/(^|[;,\s])for\s*=\s*("[^"]*"|[^;,\s]*)/gi, '$1')
    fields.push([name, text])
  }
  if (fields.length === 0) return ''
  fields.sort(([a], [b]) => (a < b ? -1 : 1))
  return ` fwd:${digest(JSON.stringify(fields), 22)}`
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

/** `scheme://authority` then the rest of an absolute-form request-target (RFC 9112 §3.2.2). */
const ABSOLUTE_FORM = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)(.*)$/is

/** A request-target as the key sees it: origin-form, plus what an absolute-form one named. */
export interface Target {
  /** Path and query, starting with `/`. */
  pathAndQuery: string
  /** Only for an absolute-form target: the scheme and authority it names (lower case). */
  absolute?: { scheme: string; authority: string }
}

/**
 * Normalises a request-target to origin-form: `http://shop.test/p?q` becomes `/p?q`, and
 * `http://shop.test` or `http://shop.test?q` gets its `/`. Undefined for anything else
 * (`*`, or whatever a lenient parser let through): not a URL the key can name.
 */
export function parseTarget(raw: string): Target | undefined {
  if (raw.startsWith('/')) return { pathAndQuery: raw }
  const match = ABSOLUTE_FORM.exec(raw)
  if (!match) return undefined
  const rest = match[3]!
  if (rest !== '' && !rest.startsWith('/') && !rest.startsWith('?')) return undefined
  return {
    pathAndQuery: rest.startsWith('/') ? rest : `/${rest}`,
    absolute: { scheme: match[1]!.toLowerCase(), authority: match[2]!.toLowerCase() },
  }
}

/**
 * The default URL key: `url:<scheme>://<host><path?query>`. Injective: the scheme ends at
 * the first `://`, a validated host contains no `/`, and the path-and-query (origin-form,
 * so it starts with `/`) runs to the end, or is a ` sha256:` digest when long. What the
 * middleware appends (a variant) starts with a space, which the URL part never contains.
 */
export function defaultUrlKey(url: string, host: string, scheme: 'http' | 'https' = 'http'): string {
  const target = parseTarget(url)
  return urlKey(scheme, host, target?.pathAndQuery ?? '/')
}

/** The key of one (scheme, host, origin-form path and query). */
export function urlKey(scheme: 'http' | 'https', host: string, pathAndQuery: string): string {
  return `url:${scheme}://${host}${keyPart(pathAndQuery)}`
}

/** The key of a route's own `key(req)` function, kept apart from the default keys. */
export function customUrlKey(userKey: string): string {
  if (typeof userKey !== 'string' || userKey === '')
    throw new TypeError('cacheRoute: key(req) must return a non-empty string')
  return `key:${keyPart(userKey)}`
}

/**
 * The request header value one variant dimension sees: field lines joined, runs of
 * whitespace around commas collapsed. Nothing more: lower-casing or reordering could
 * merge values that a handler treats differently (RFC 9111 §4.1 allows only
 * normalisations known to be equivalent). `null` when absent, distinct from `""`.
 * `Accept-Encoding` is the exception: reduced to one coding (accept-encoding.ts), which
 * is also what the handler sees while it runs as the cache's fetch.
 */
export function normalizedHeader(req: KeyedRequest, name: string): string | null {
  const value = req.headers[name]
  if (name === 'accept-encoding') {
    const coding = reducedAcceptEncoding(value)
    if (coding !== undefined) return coding
  }
  if (value === undefined) return null
  const joined = Array.isArray(value) ? value.join(', ') : value
  return joined
    .trim()
    .replace(/\s*,\s*/g, ', ')
    .replace(/[ \t]+/g, ' ')
}

/**
 * The secondary key of one variant: the URL key, the variant list's generation id,
 * and a digest of the request's values for every header in the list. Credentials
 * (when a route keys on them) enter only through the digest, never in clear.
 */
export function variantKey(urlKey: string, generation: string, headers: readonly string[], req: KeyedRequest): string {
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
