import { initialAgeMs } from './age.js'
import { isStrongEtag, strongEtag } from './conditional.js'
import { headerOf, withoutFields, withoutHopByHop, type HeaderList } from './headers.js'
import type { Replayable } from './replay.js'
import type { ResponseSnapshot, StoredResponse } from './stored-response.js'

/**
 * From a captured snapshot to what is replayed and stored.
 *
 * A snapshot holds every header of the response, including those that middleware
 * before cacheRoute had set (CORS, request ids, `X-Powered-By`). Those belong to each
 * request, and middleware runs again for every hit, so only the handler chain's own
 * contribution is kept: headers it added or changed, and the names it removed.
 */
export function ownForm(snapshot: ResponseSnapshot, upstream: HeaderList): Replayable {
  const before = new Map(upstream.map(([name, value]) => [name.toLowerCase(), JSON.stringify(value)]))
  const after = new Set(snapshot.headers.map(([name]) => name.toLowerCase()))
  const headers = withoutHopByHop(snapshot.headers).filter(
    ([name, value]) => before.get(name.toLowerCase()) !== JSON.stringify(value),
  )
  const removedHeaders = [...before.keys()].filter((name) => !after.has(name))
  const own: Replayable = { status: snapshot.status, headers, body: snapshot.body }
  if (snapshot.statusMessage !== undefined) own.statusMessage = snapshot.statusMessage
  if (removedHeaders.length) own.removedHeaders = removedHeaders
  return own
}

/**
 * The stored form: the own form, with the route's ETag policy applied, and a `Date` (so
 * `Date` + `Age` describe the stored response's real age downstream). The body is the
 * captured buffer itself, stored as raw bytes (stored-response.ts). Set-Cookie never
 * gets here: such responses are not stored.
 */
export function storedForm(
  snapshot: ResponseSnapshot,
  upstream: HeaderList,
  etag: 'keep' | 'strong' | false,
  now = Date.now(),
): StoredResponse {
  const own = ownForm(snapshot, upstream)
  // Its Age becomes initialAgeMs: replayed as the age now, never as stored.
  let headers = withoutFields(own.headers, ['age'])
  if (etag === false) headers = withoutFields(headers, ['etag'])
  if (etag === 'strong' && !isStrongEtag(headerOf(headers, 'etag')))
    headers = [...withoutFields(headers, ['etag']), ['ETag', strongEtag(own.body)]]
  if (headerOf(headers, 'date') === undefined) headers = [...headers, ['Date', new Date(now).toUTCString()]]
  const stored: StoredResponse = { status: own.status, headers, body: own.body, storedAt: now }
  const initialAge = initialAgeMs(snapshot.headers, snapshot)
  if (initialAge > 0) stored.initialAgeMs = initialAge
  if (own.statusMessage !== undefined) stored.statusMessage = own.statusMessage
  if (own.removedHeaders) stored.removedHeaders = own.removedHeaders
  return stored
}
