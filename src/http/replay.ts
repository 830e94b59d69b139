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

/**
 * What goes out for one replay, framework-free: the status, the fields to remove (set by
 * middleware before the cache, removed by the handler), the fields to set, in order, and
 * the body (`undefined`: none, and no `Content-Length` for a bodyless status).
 */
export interface ReplayPlan {
  status: number
  statusMessage?: string
  remove: string[]
  headers: HeaderList
  body: Buffer | undefined
}

/** Statuses that never carry a body, so never a Content-Length either. */
export function bodyless(status: number): boolean {
  return status < 200 || status === 204 || status === 304
}

/**
 * What a replay of `response` sends. Framing is recomputed from the exact bytes:
 * hop-by-hop fields are dropped, `Content-Length` is the stored body's length (kept for
 * HEAD, which gets no body), `Age` replaces any stored one, a matching validator turns a
 * 2xx into a 304.
 */
export function replayPlan(response: Replayable, options: ReplayOptions): ReplayPlan {
  let status = response.status
  let headers = fieldsKept(response, options.ageSeconds !== undefined, options.omit ?? [])
  const notModified = options.validators !== undefined && isNotModified(options.validators, status, headers)
  if (notModified) {
    status = 304
    headers = notModifiedHeaders(headers)
  }
  const out: HeaderList = [...headers]
  if (options.ageSeconds !== undefined) out.push(['Age', String(Math.max(0, Math.floor(options.ageSeconds)))])
  out.push(...(options.statusHeaders ?? []))
  const plan: ReplayPlan = { status, remove: [...(response.removedHeaders ?? [])], headers: out, body: undefined }
  if (response.statusMessage !== undefined && !notModified) plan.statusMessage = response.statusMessage
  if (bodyless(status)) {
    plan.remove.push('content-length')
    return plan
  }
  plan.headers.push(['Content-Length', String(response.body.length)])
  plan.body = options.head ? Buffer.alloc(0) : response.body
  return plan
}

/** The fields a replay keeps of a response, per response: a stored one is replayed by every hit, the same each time. */
interface KeptFields {
  dropAge: boolean
  omit: readonly string[]
  headers: HeaderList
}

const keptFields = new WeakMap<Replayable, KeptFields>()

/**
 * `response`'s fields without hop-by-hop ones, `Content-Length` (recomputed), `Age` when
 * replaced, and the `omit`ted: computed once per response and options, and never
 * modified after (replayPlan copies it).
 */
function fieldsKept(response: Replayable, dropAge: boolean, omit: readonly string[]): HeaderList {
  const known = keptFields.get(response)
  if (known && known.dropAge === dropAge && sameNames(known.omit, omit)) return known.headers
  const headers = withoutFields(withoutHopByHop(response.headers), [
    'content-length',
    ...(dropAge ? ['age'] : []),
    ...omit,
  ])
  keptFields.set(response, { dropAge, omit: [...omit], headers })
  return headers
}

function sameNames(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((name, i) => name === b[i])
}
