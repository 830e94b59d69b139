import type { RequestLike as Request } from './http-types.js'
import { deltaSeconds, forbidsStale, parseCacheControl, responseLifetime } from './cache-control.js'
import { headerOf, tokensOf, type HeaderList } from './headers.js'
import { reducedAcceptEncoding } from './accept-encoding.js'
import {
  customUrlKey,
  defaultUrlKey,
  hasForeignForwardedHost,
  hasForeignForwardedProto,
  isRewritten,
  parseTarget,
  requestScheme,
  validatedHost,
} from './key.js'
import type { RouteSettings } from './options.js'
import type { ResponseSnapshot } from './stored-response.js'

/**
 * What may be looked up and what may be stored (HTTP-CACHING.md rules 1-6, 9-11, 18).
 * Pure functions of the request, the response and the route settings.
 */

const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/** Why a request does not use the cache (`X-Cache: BYPASS`). */
export type BypassReason =
  | 'host'
  | 'forwarded-host'
  | 'forwarded-proto'
  | 'absolute-form'
  | 'rewritten'
  | 'request-body'
  | 'range'
  | 'precondition'
  | 'accept-encoding'
  | 'cookie'
  | 'bypass-option'
  | 'key-error'

export type RequestVerdict =
  /** GET/HEAD: look up `key`; on a miss, one request runs the handler. */
  | { action: 'cache'; key: string }
  /** Run the handler for this request alone, uncached. */
  | { action: 'bypass'; reason: BypassReason }
  /**
   * GET/HEAD with `Authorization` on a route that did not opt in: never served from the
   * cache, but its response is stored under `key` if it says it is shared (RFC 9111 §3.5).
   */
  | { action: 'authorized'; key: string }
  /** POST/PUT/PATCH/DELETE: run the handler; a 2xx/3xx answer invalidates `keys` (the URL, for either scheme). */
  | { action: 'invalidate'; keys: string[] }
  /** Any other method (OPTIONS, ...): not the cache's business. */
  | { action: 'ignore' }

export function classifyRequest(req: Request, settings: RouteSettings): RequestVerdict {
  const method = req.method.toUpperCase()
  const lookup = method === 'GET' || method === 'HEAD'
  if (!lookup && !UNSAFE_METHODS.has(method)) return { action: 'ignore' }

  // A GET or HEAD with a body (fat GET): a handler behind express.json() reads req.body,
  // which no key can see. Never stored, never served from the cache.
  if (lookup && hasBody(req)) return { action: 'bypass', reason: 'request-body' }
  const host = validatedHost(req, settings.allowedHosts)
  if (host === undefined) return lookup ? { action: 'bypass', reason: 'host' } : { action: 'ignore' }
  let key: string
  if (settings.key) {
    try {
      key = customUrlKey(settings.key(req))
    } catch (error) {
      settings.onError(error, req)
      return lookup ? { action: 'bypass', reason: 'key-error' } : { action: 'ignore' }
    }
    if (!lookup) return { action: 'invalidate', keys: [key] }
  } else {
    // A write invalidates the URL whichever scheme it came in by.
    if (!lookup)
      return { action: 'invalidate', keys: [defaultUrlKey(req, host, 'http'), defaultUrlKey(req, host, 'https')] }
    // The default key trusts Host alone, so a request that claims another host is not
    // allowed near the cache. A custom key function decides for itself.
    if (hasForeignForwardedHost(req, host)) return { action: 'bypass', reason: 'forwarded-host' }
    // The scheme is keyed; one that is neither http nor https (a forged
    // X-Forwarded-Proto, trust proxy on) could only be a poisoning attempt.
    const scheme = requestScheme(req)
    if ((scheme !== 'http' && scheme !== 'https') || hasForeignForwardedProto(req, scheme))
      return { action: 'bypass', reason: 'forwarded-proto' }
    // An absolute-form target is keyed as its origin-form, so it must name this very
    // scheme and Host; anything else (`*`, another authority) is not a URL we key.
    const target = parseTarget(req.originalUrl)
    if (!target || (target.absolute && (target.absolute.scheme !== scheme || target.absolute.authority !== host)))
      return { action: 'bypass', reason: 'absolute-form' }
    // Middleware before us rewrote the URL the router matched (X-Original-URL, an SPA
    // fallback to /index.html): the response depends on what drove the rewrite.
    if (isRewritten(req)) return { action: 'bypass', reason: 'rewritten' }
    key = defaultUrlKey(req, host, scheme)
  }

  // Only whole responses are stored, and a handler that would answer 206 (sendFile)
  // may produce one too large to store: a range request is its handler's business.
  if (req.headers.range !== undefined) return { action: 'bypass', reason: 'range' }
  // Preconditions on the selected representation: the handler evaluates them (412), not
  // the cache, which would otherwise have to hide them from the handler and ignore them.
  if (req.headers['if-match'] !== undefined || req.headers['if-unmodified-since'] !== undefined)
    return { action: 'bypass', reason: 'precondition' }
  // A client that refuses identity and every coding a variant is made with.
  if (reducedAcceptEncoding(req.headers['accept-encoding']) === undefined)
    return { action: 'bypass', reason: 'accept-encoding' }
  if (settings.bypass?.(req)) return { action: 'bypass', reason: 'bypass-option' }
  if (!settings.allowAuthenticated) {
    if (req.headers.cookie !== undefined) return { action: 'bypass', reason: 'cookie' }
    if (req.headers.authorization !== undefined) return { action: 'authorized', key }
  }
  return { action: 'cache', key }
}

/** Does the request carry a body (RFC 9112 §6.3: Transfer-Encoding, or a Content-Length other than 0)? */
function hasBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true
  const length = req.headers['content-length']
  return length !== undefined && length.trim() !== '0'
}

/** Why a response was not stored. */
export type UncacheableReason =
  'status' | 'no-store' | 'private' | 'no-cache' | 'vary-star' | 'set-cookie' | 'authorization' | 'expired'

/** Lifetimes handed to `ctx.cacheFor`, in ms; undefined fields keep the route's settings. */
export interface Lifetimes {
  ttl?: number
  staleTtl?: number
  staleIfError?: number
}

export type ResponseVerdict =
  | { storable: false; reason: UncacheableReason }
  /** `vary`: the request headers the response says it varies on (lower case). */
  | { storable: true; life: Lifetimes; vary: string[] }

/**
 * May this response be stored, and for how long? `toAuthorizedRequest`: the request
 * carried `Authorization` without the route opting in, so only an explicitly shared
 * response may be stored (RFC 9111 §3.5).
 */
export function judgeResponse(
  response: ResponseSnapshot,
  settings: RouteSettings,
  toAuthorizedRequest = false,
): ResponseVerdict {
  const { status, headers } = response
  if (!settings.statuses.has(status)) return { storable: false, reason: 'status' }
  const forbidden = forbiddenBy(headers)
  if (forbidden) return { storable: false, reason: forbidden }
  const directives = parseCacheControl(headerOf(headers, 'cache-control'))
  const vary = tokensOf(headerOf(headers, 'vary'))
  if (
    toAuthorizedRequest &&
    !(directives.has('public') || directives.has('s-maxage') || directives.has('must-revalidate'))
  ) {
    return { storable: false, reason: 'authorization' }
  }

  // The response's explicit lifetime for a shared cache (s-maxage, then max-age, then
  // Expires; RFC 9111 §4.2.1). By default it can only shorten the route's ttl; with
  // honorCacheControl it decides, up to maxTtl. Already stale (max-age=0): not stored.
  const life: Lifetimes = {}
  const stated = responseLifetime(directives, headerOf(headers, 'expires'), headerOf(headers, 'date'), Date.now())
  if (stated !== undefined) {
    if (stated <= 0) return { storable: false, reason: 'expired' }
    life.ttl = settings.honorCacheControl ? Math.min(stated, settings.maxTtl) : Math.min(stated, settings.ttl)
  }
  if (settings.honorCacheControl) {
    const revalidateWindow = deltaSeconds(directives, 'stale-while-revalidate')
    if (revalidateWindow !== undefined) life.staleTtl = revalidateWindow
    const errorWindow = deltaSeconds(directives, 'stale-if-error')
    if (errorWindow !== undefined) life.staleIfError = errorWindow
  }
  if (forbidsStale(directives)) {
    life.staleTtl = 0
    life.staleIfError = 0
  }
  return { storable: true, life, vary }
}

/**
 * Headers that forbid storing a response whatever else it says: judged on the captured
 * response, and again on the headers that went out (middleware before cacheRoute may
 * add some as the head goes out).
 */
export function forbiddenBy(headers: HeaderList): UncacheableReason | undefined {
  const directives = parseCacheControl(headerOf(headers, 'cache-control'))
  // Response directives are obeyed whatever the route says (RFC 9111 §5.2.2).
  if (directives.has('no-store')) return 'no-store'
  if (directives.has('private')) return 'private'
  // no-cache: "revalidate before every reuse". Not storing it is the simple, safe reading.
  if (directives.has('no-cache')) return 'no-cache'
  if (tokensOf(headerOf(headers, 'vary')).includes('*')) return 'vary-star'
  if (headerOf(headers, 'set-cookie') !== undefined) return 'set-cookie'
  return undefined
}

/**
 * A 5xx other than 501 (which is stored, see DEFAULT_STATUSES): a failure of the moment.
 * Stale-if-error covers it (RFC 5861 §4 names 500, 502, 503, 504), and it never turns
 * off coalescing (no hit-for-miss).
 */
export function isFailure(status: number): boolean {
  return status >= 500 && status !== 501
}

/** 2xx and 3xx to an unsafe method invalidate the URL (RFC 9111 §4.4). */
export function invalidates(status: number): boolean {
  return status >= 200 && status < 400
}
