import type { ServerResponse } from 'node:http'
import { isNotModified, notModifiedHeaders, type Validators } from './conditional.js'
import { withoutFields, withoutHopByHop, type HeaderList } from './headers.js'

/** `X-Cache` values: from the cache fresh / stale, produced by this request's handler and stored / not stored. */
export type CacheStatus = 'HIT' | 'STALE' | 'MISS' | 'BYPASS' | 'REVALIDATED'

/** A response to send, stored or the handler's own. */
export interface Replayable {
  status: number
  statusMessage?: string
  headers: HeaderList
  removedHeaders?: string[]
  body: Buffer
}

export interface ReplayOptions {
  /** A HEAD request: headers (with the GET's Content-Length) but no body. */
  head: boolean
  /** The client's validators; when given, a matching 2xx becomes a 304. */
  validators?: Validators
  /** `Age` to send, replacing the response's own (current age, RFC 9111 §4.2.3); otherwise its own `Age` is kept. */
  ageSeconds?: number
  /** Fields never sent (the route's own targeted cache-control field). */
  omit?: readonly string[]
  /** `X-Cache` and `Cache-Status`, as the route enables them. */
  statusHeaders?: HeaderList
}

/** Statuses that never carry a body, so never a Content-Length either. */
function bodyless(status: number): boolean {
  return status < 200 || status === 204 || status === 304
}

/**
 * Sends `response` on the live response object, through whatever middleware before
 * cacheRoute wrapped it (compression before us compresses here). Framing is
 * recomputed from the exact bytes: hop-by-hop fields are dropped, `Content-Length` is
 * the stored body's length, `Age` replaces any stored one.
 */
export function replay(res: ServerResponse, response: Replayable, options: ReplayOptions): void {
  let status = response.status
  let headers = withoutFields(withoutHopByHop(response.headers), [
    'content-length',
    ...(options.ageSeconds === undefined ? [] : ['age']),
    ...(options.omit ?? []),
  ])
  const notModified = options.validators !== undefined && isNotModified(options.validators, status, headers)
  if (notModified) {
    status = 304
    headers = notModifiedHeaders(headers)
  }
  for (const name of response.removedHeaders ?? []) res.removeHeader(name)
  for (const [name, value] of headers) res.setHeader(name, value)
  if (options.ageSeconds !== undefined) res.setHeader('Age', String(Math.max(0, Math.floor(options.ageSeconds))))
  for (const [name, value] of options.statusHeaders ?? []) res.setHeader(name, value)
  res.statusCode = status
  if (response.statusMessage !== undefined && !notModified) res.statusMessage = response.statusMessage
  if (bodyless(status)) {
    res.removeHeader('Content-Length')
    res.end()
    return
  }
  res.setHeader('Content-Length', String(response.body.length))
  if (options.head) res.end()
  else res.end(response.body)
}
