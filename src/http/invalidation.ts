import { headerOf, type HeaderList } from './headers.js'
import { parseTarget } from './key.js'

/**
 * Invalidation (RFC 9111 §4.4), framework-free: which requests invalidate, and which
 * URLs of this origin a response names besides its target.
 */

/** The methods known to be safe (RFC 9110 §9.2.1); every other one, known or not, may change the resource. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE'])

export function isUnsafeMethod(method: string): boolean {
  return !SAFE_METHODS.has(method.toUpperCase())
}

/** A non-error answer (2xx, 3xx) to an unsafe method invalidates. */
export function invalidates(status: number): boolean {
  return status >= 200 && status < 400
}

/**
 * The origin-form targets (path and query) of `Location` and `Content-Location` that are
 * on the request's own host (`host`, lower case, with its port), resolved against the
 * request's `target`. Another host's URLs are not ours to invalidate (RFC 9111 §4.4 only
 * allows same-origin ones, so a response cannot make us drop a stranger's entries).
 */
export function namedTargets(headers: HeaderList, target: string, host: string, scheme: string): string[] {
  const targets: string[] = []
  for (const name of ['location', 'content-location']) {
    const value = headerOf(headers, name)?.trim()
    if (!value) continue
    const resolved = resolveOnHost(value, target, host, scheme)
    if (resolved !== undefined && !targets.includes(resolved)) targets.push(resolved)
  }
  return targets
}

function resolveOnHost(value: string, target: string, host: string, scheme: string): string | undefined {
  const withoutFragment = value.split('#')[0]!
  // Origin-form as sent: kept raw, as the key keeps request-targets raw.
  if (withoutFragment.startsWith('/') && !withoutFragment.startsWith('//')) return withoutFragment
  const absolute = parseTarget(withoutFragment)
  if (absolute?.absolute) return absolute.absolute.authority === host ? absolute.pathAndQuery : undefined
  try {
    const url = new URL(withoutFragment, `${scheme}://${host}${target}`)
    if (url.host.toLowerCase() !== host || (url.protocol !== 'http:' && url.protocol !== 'https:')) return undefined
    return url.pathname + url.search
  } catch {
    return undefined
  }
}
