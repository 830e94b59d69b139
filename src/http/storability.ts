import { headerValue, type HttpRequest } from './request.js'
import { reducedAcceptEncoding } from './accept-encoding.js'
import {
  customUrlKey,
  defaultUrlKey,
  forwardedKeyPart,
  hasForeignForwardedHost,
  hasForeignForwardedProto,
  parseTarget,
  urlKey,
  validatedHost,
} from './key.js'
import { isUnsafeMethod } from './invalidation.js'

/** The request's origin and target, for the URLs a response names (invalidation.ts). */
export interface Origin {
  host: string
  scheme: string
  target: string
}
import type { RouteSettings } from './options.js'

/**
 * What may be looked up and what may be stored (docs/express.md, rules 1-6, 9-11 and 18).
 * Pure functions of the request, the response and the route settings.
 */

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
  | 'head-handler'

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
  /**
   * Any method not known to be safe (POST, PUT, PATCH, DELETE, PURGE, ...): run the handler;
   * a 2xx/3xx answer invalidates `keys` (the URL, for either scheme), and, with the default
   * key, the same-origin URLs its `Location`/`Content-Location` name (`keysOf`).
   */
  | { action: 'invalidate'; keys: string[]; keysOf?: (pathAndQuery: string) => string[]; origin?: Origin }
  /** Any other method (OPTIONS, ...): not the cache's business. */
  | { action: 'ignore' }

/**
 * What the cache does with `req`. `raw` is the framework's own request, handed to the
 * route's `key` and `bypass` functions.
 */
export function classifyRequest<Req>(req: HttpRequest, raw: Req, settings: RouteSettings<Req>): RequestVerdict {
  const method = req.method.toUpperCase()
  const lookup = method === 'GET' || method === 'HEAD'
  if (!lookup && !isUnsafeMethod(method)) return { action: 'ignore' }

  // A GET or HEAD with a body (fat GET): a handler behind express.json() reads req.body,
  // which no key can see. Never stored, never served from the cache.
  if (lookup && hasBody(req)) return { action: 'bypass', reason: 'request-body' }
  // The route has a HEAD handler of its own, which Express has already chosen: run as a
  // GET it would still answer with an empty body, stored for every GET (RFC 9111 §4.3.5:
  // a HEAD response never replaces a stored GET response). Its own handler answers it.
  if (method === 'HEAD' && req.ownHeadHandler === true) return { action: 'bypass', reason: 'head-handler' }
  const host = validatedHost(req, settings.allowedHosts)
  if (host === undefined) return lookup ? { action: 'bypass', reason: 'host' } : { action: 'ignore' }
  let key: string
  if (settings.key) {
    try {
      key = customUrlKey(settings.key(raw))
    } catch (error) {
      settings.onError(error, raw)
      return lookup ? { action: 'bypass', reason: 'key-error' } : { action: 'ignore' }
    }
    if (!lookup) return { action: 'invalidate', keys: [key] }
  } else {
    // A write invalidates the URL whichever scheme it came in by, as its proxy sent it and bare.
    const forwarded = forwardedKeyPart(req, req.scheme)
    if (!lookup) {
      const keysOf = (pathAndQuery: string) => {
        const bare = [urlKey('http', host, pathAndQuery), urlKey('https', host, pathAndQuery)]
        return forwarded ? [...bare, ...bare.map((key) => key + forwarded)] : bare
      }
      const target = parseTarget(req.url)?.pathAndQuery ?? '/'
      return {
        action: 'invalidate',
        keys: keysOf(target),
        keysOf,
        origin: { host, scheme: req.scheme, target },
      }
    }
    // The default key trusts Host alone, so a request that claims another host is not
    // allowed near the cache. A custom key function decides for itself.
    if (hasForeignForwardedHost(req, host)) return { action: 'bypass', reason: 'forwarded-host' }
    // The scheme is keyed; one that is neither http nor https (a forged
    // X-Forwarded-Proto, trust proxy on) could only be a poisoning attempt.
    const scheme = req.scheme
    if ((scheme !== 'http' && scheme !== 'https') || hasForeignForwardedProto(req, scheme))
      return { action: 'bypass', reason: 'forwarded-proto' }
    // An absolute-form target is keyed as its origin-form, so it must name this very
    // scheme and Host; anything else (`*`, another authority) is not a URL we key.
    const target = parseTarget(req.url)
    if (!target || (target.absolute && (target.absolute.scheme !== scheme || target.absolute.authority !== host)))
      return { action: 'bypass', reason: 'absolute-form' }
    // Middleware before us rewrote the URL the router matched (X-Original-URL, an SPA
    // fallback to /index.html): the response depends on what drove the rewrite.
    if (req.rewritten === true) return { action: 'bypass', reason: 'rewritten' }
    key = defaultUrlKey(req.url, host, scheme) + forwarded
  }

  // Only whole responses are stored, and a handler that would answer 206 (sendFile)
  // may produce one too large to store: a range request is its handler's business.
  if (req.headers.range !== undefined) return { action: 'bypass', reason: 'range' }
  // Preconditions on the selected representation: the handler evaluates them (412), not
  // the cache, which would otherwise have to hide them from the handler and ignore them.
  if (req.headers['if-match'] !== undefined || req.headers['if-unmodified-since'] !== undefined)
    return { action: 'bypass', reason: 'precondition' }
  // A client that refuses identity and every coding a variant is made with.
  if (reducedAcceptEncoding(headerValue(req.headers, 'accept-encoding')) === undefined)
    return { action: 'bypass', reason: 'accept-encoding' }
  if (settings.bypass?.(raw)) return { action: 'bypass', reason: 'bypass-option' }
  if (!settings.allowAuthenticated) {
    if (req.headers.cookie !== undefined) return { action: 'bypass', reason: 'cookie' }
    if (req.headers.authorization !== undefined) return { action: 'authorized', key }
  }
  return { action: 'cache', key }
}

/** Does the request carry a body (RFC 9112 §6.3: Transfer-Encoding, or a Content-Length other than 0)? */
function hasBody(req: HttpRequest): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true
  const length = headerValue(req.headers, 'content-length')
  return length !== undefined && length.trim() !== '0'
}
