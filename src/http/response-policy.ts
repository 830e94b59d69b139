import { initialAgeMs } from './age.js'
import { deltaSeconds, forbidsStale, parseCacheControl, responseLifetime, type Directives } from './cache-control.js'
import { headerOf, tokensOf, type HeaderList } from './headers.js'
import type { ResponseSnapshot } from './stored-response.js'
import { hasValidator } from './revalidation.js'
import { targetedDirectives } from './targeted.js'

/**
 * What may be stored, and for how long (docs/express.md, rules 2-4 and 9-11), framework-free:
 * pure functions of a response `{ status, headers }` and the route's policy.
 */

/** The route settings the response policy reads (RouteSettings has them all). */
export interface ResponsePolicy {
  ttl: number
  maxTtl: number
  honorCacheControl: boolean
  statuses: ReadonlySet<number>
  /** Targeted cache-control fields (RFC 9213), in precedence order, lower case. */
  targetedFields: readonly string[]
  /** How long a response that must be revalidated before reuse is kept for it, ms (0: such responses are not stored). */
  revalidateTtl: number
  /** The route's ETag policy: with `false` no ETag is stored, so only `Last-Modified` can revalidate. */
  etag: 'keep' | 'strong' | false
}

/**
 * The caching directives this cache obeys: those of the first targeted field present and
 * valid (RFC 9213 §2.2), which then stand instead of `Cache-Control` and `Expires`; else
 * `Cache-Control`'s.
 */
export function effectiveDirectives(
  headers: HeaderList,
  targetedFields: readonly string[],
): { directives: Directives; targeted: boolean } {
  const targeted = targetedDirectives(headers, targetedFields)
  if (targeted) return { directives: targeted, targeted: true }
  return { directives: parseCacheControl(headerOf(headers, 'cache-control')), targeted: false }
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
  /**
   * `vary`: the request headers the response says it varies on (lower case).
   * `mustRevalidate`: once stale it is never served stale, only revalidated (no-cache,
   * must-revalidate, proxy-revalidate, s-maxage, or stale on arrival, with a validator).
   */
  | { storable: true; life: Lifetimes; vary: string[]; mustRevalidate: boolean }

/**
 * May this response be stored, and for how long? `toAuthorizedRequest`: the request
 * carried `Authorization` without the route opting in, so only an explicitly shared
 * response may be stored (RFC 9111 §3.5).
 */
export function judgeResponse(
  response: ResponseSnapshot,
  settings: ResponsePolicy,
  toAuthorizedRequest = false,
): ResponseVerdict {
  const { status, headers } = response
  if (!settings.statuses.has(status)) return { storable: false, reason: 'status' }
  const forbidden = forbiddenBy(headers, settings.targetedFields, settings.revalidateTtl > 0)
  if (forbidden) return { storable: false, reason: forbidden }
  // Kept once stale, to be revalidated (RFC 9111 §4.3) rather than fetched again.
  const revalidatable =
    settings.revalidateTtl > 0 &&
    hasValidator(settings.etag === false ? headers.filter(([name]) => name.toLowerCase() !== 'etag') : headers)
  const { directives, targeted } = effectiveDirectives(headers, settings.targetedFields)
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
  // Its freshness left is the lifetime minus the age it already had (RFC 9111 §4.2.3):
  // `max-age=3600` with `Age: 7200` is stale on arrival.
  const expires = targeted ? undefined : headerOf(headers, 'expires')
  const stated = responseLifetime(directives, expires, headerOf(headers, 'date'), Date.now())
  if (directives.has('no-cache') && !revalidatable) return { storable: false, reason: 'no-cache' }
  let mustRevalidate = revalidatable && (directives.has('no-cache') || forbidsStale(directives))
  if (stated !== undefined) {
    const left = stated - initialAgeMs(headers, response)
    if (left <= 0 && !revalidatable) return { storable: false, reason: 'expired' }
    if (left <= 0) mustRevalidate = true
    life.ttl = settings.honorCacheControl ? Math.min(left, settings.maxTtl) : Math.min(left, settings.ttl)
  }
  // no-cache: "revalidate before every reuse": stored stale at once (the core's shortest ttl).
  if (directives.has('no-cache') || (life.ttl !== undefined && life.ttl <= 0)) life.ttl = 1
  if (settings.honorCacheControl) {
    const revalidateWindow = deltaSeconds(directives, 'stale-while-revalidate')
    if (revalidateWindow !== undefined) life.staleTtl = revalidateWindow
    const errorWindow = deltaSeconds(directives, 'stale-if-error')
    if (errorWindow !== undefined) life.staleIfError = errorWindow
  }
  if (forbidsStale(directives) || mustRevalidate) {
    life.staleTtl = 0
    // Kept past its freshness only to be revalidated: never served stale (see flows.ts).
    life.staleIfError = mustRevalidate ? settings.revalidateTtl : 0
  }
  return { storable: true, life, vary, mustRevalidate }
}

/**
 * Headers that forbid storing a response whatever else it says: judged on the captured
 * response, and again on the headers that went out (middleware before cacheRoute may
 * add some as the head goes out).
 */
export function forbiddenBy(
  headers: HeaderList,
  targetedFields: readonly string[],
  revalidates = true,
): UncacheableReason | undefined {
  const { directives } = effectiveDirectives(headers, targetedFields)
  // Response directives are obeyed whatever the route says (RFC 9111 §5.2.2).
  if (directives.has('no-store')) return 'no-store'
  if (directives.has('private')) return 'private'
  // no-cache: "revalidate before every reuse": stored only if it can be revalidated.
  if (directives.has('no-cache') && !(revalidates && hasValidator(headers))) return 'no-cache'
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
