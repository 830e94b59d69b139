/**
 * The `Cache-Status` response field (RFC 9211), framework-free: one member naming this
 * cache, saying whether the response came from it (`hit`) or why the request went forward
 * to the handler (`fwd`), whether the handler's answer was `stored`, and, in `detail`,
 * the real reason for a pass (`detail=no-store`, `detail=cookie`, ...).
 */

/** RFC 9211 §2.2 `fwd` values this cache uses. */
export type Forward = 'bypass' | 'method' | 'uri-miss' | 'vary-miss' | 'request' | 'stale'

export interface CacheOutcome {
  hit?: boolean
  fwd?: Forward
  /** The status the handler answered a revalidation with (304 or a new response). */
  fwdStatus?: number
  stored?: boolean
  /** The request waited for another request's handler (RFC 9211 §2.6). */
  collapsed?: boolean
  /** Freshness left, in seconds; negative when served stale. */
  ttl?: number
  detail?: string
}

/** A name as RFC 9211 wants it: an sf-token (else it is sent as an sf-string). */
const TOKEN = /^[A-Za-z*][A-Za-z0-9:/!#$%&'*+\-.^_`|~]*$/
const DETAIL = /^[A-Za-z*][A-Za-z0-9:/!#$%&'*+\-.^_`|~]*$/

/** Is `name` usable as this cache's name (an sf-token, or printable ASCII sent as an sf-string)? */
export function validCacheName(name: unknown): name is string {
  return typeof name === 'string' && name.length > 0 && name.length <= 64 && /^[\x20-\x7e]+$/.test(name)
}

/** The Cache-Status member of this cache, e.g. `stampede-guard; fwd=uri-miss; stored`. */
export function cacheStatusValue(name: string, outcome: CacheOutcome): string {
  const parts = [TOKEN.test(name) ? name : JSON.stringify(name)]
  if (outcome.hit) parts.push('hit')
  if (outcome.fwd) parts.push(`fwd=${outcome.fwd}`)
  if (outcome.fwdStatus !== undefined) parts.push(`fwd-status=${outcome.fwdStatus}`)
  if (outcome.stored) parts.push('stored')
  if (outcome.collapsed) parts.push('collapsed')
  if (outcome.ttl !== undefined) parts.push(`ttl=${Math.trunc(outcome.ttl)}`)
  if (outcome.detail)
    parts.push(`detail=${DETAIL.test(outcome.detail) ? outcome.detail : JSON.stringify(outcome.detail)}`)
  return parts.join('; ')
}

/** Request-side reasons for not using the cache, as `fwd`: the request's own doing, a method, or the cache's choice. */
export function forwardOf(reason: string): Forward {
  if (reason === 'head-handler') return 'method'
  const requestDriven = ['cookie', 'authorization', 'range', 'precondition', 'bypass-option', 'request-body']
  return requestDriven.includes(reason) || reason === 'accept-encoding' ? 'request' : 'bypass'
}
