import type { Cache } from '../cache/cache.js'
import type { CallOptions } from '../options.js'
import { cacheStatusValue, forwardOf, type CacheOutcome, type Forward } from './cache-status.js'
import type { Validators } from './conditional.js'
import type { HeaderList } from './headers.js'
import type { RouteSettings } from './options.js'
import type { CacheStatus, Replayable } from './replay.js'
import type { HttpHeaders } from './request.js'
import type { ResponseSnapshot, StoredResponse } from './stored-response.js'

/**
 * The contract between the engine's flows (flows.ts, loaders.ts) and an adapter: one
 * request through the cache. Express implements it over its live `res`
 * (src/express/exchange.ts); adapters whose handler yields a response object (Fastify,
 * Hono, any fetch handler) use OriginExchange (origin-exchange.ts).
 *
 * The rules every implementation keeps:
 * - the handler runs for this request at most once: captured, or once uncached (fail
 *   open), never both;
 * - the client is answered at most once: by a replay, or by a released capture
 *   streaming to it, whichever claims it first.
 */

/** Why a capture stopped buffering: too large, streamed (`text/event-stream`, flushed early), slow, over the budget, cut off, or not its Content-Length. */
export type ReleaseReason = 'too-large' | 'streamed' | 'timeout' | 'over-budget' | 'broken' | 'truncated'

/**
 * How a handler run ended: `complete` with the whole response in hand, or `released`
 * (the rest streamed to the client when `toClient`, else was dropped; nothing is stored).
 */
export type CaptureEnd =
  { kind: 'complete'; response: ResponseSnapshot } | { kind: 'released'; reason: ReleaseReason; toClient: boolean }

/** What one cached route learns while it serves, shared by its requests. */
export interface RouteState {
  /**
   * A response judged storable went out with a Set-Cookie (or no-store, private,
   * no-cache, Vary: *) that the handler chain did not set: middleware before the cache
   * adds it as the head goes out (express-session's on-headers hook). A response whose
   * head cannot go out before it is stored (a background refresh) cannot show it, so on
   * this route such responses are no longer stored.
   */
  upstreamForbidsStoring: boolean
}

/** Why a request went forward (or waited), for `Cache-Status`: set along the way. */
export interface ExchangeNote {
  fwd?: Forward
  detail?: string
  fwdStatus?: number
  collapsed?: boolean
}

/** How the flows ask for this request's handler to be run. */
export interface RunHandlerOptions {
  /**
   * The handler sees the request a cache fetches with: HEAD becomes GET (so there is a
   * body to store), the client's validators are hidden (the cache answers them), and
   * Accept-Encoding is reduced (accept-encoding.ts).
   */
  asOrigin: boolean
  /** Awaited before a released response is flushed to the client (an unsafe method invalidates first). */
  beforeFlush?: (status: number | undefined) => Promise<void>
  /** Called once when the handler ends normally, before its client gets anything: the flows answer the client here. */
  completed?: (response: ResponseSnapshot) => void
  /** Revalidate a stale stored response: the handler sees its validators instead of the client's. */
  conditional?: { ifNoneMatch?: string; ifModifiedSince?: string }
}

export interface HttpExchange<Req = unknown> {
  readonly cache: Cache
  readonly settings: RouteSettings<Req>
  readonly route: RouteState
  /** The request's URL key (classifyRequest). */
  readonly key: string
  /** The request's header fields as the client sent them (variant keys are computed from these). */
  readonly req: { headers: HttpHeaders }
  readonly head: boolean
  /** The client's validators, saved before a capture hides them from the handler. */
  readonly validators: Validators
  /** Headers set before the cache ran (per request, so never stored). */
  readonly upstreamHeaders: HeaderList
  readonly note: ExchangeNote
  /** Set by the loader when this request's handler produced a stored response (`MISS`). */
  storedOwn: StoredResponse | undefined
  /** Has this request's handler been started (captured)? */
  readonly handlerStarted: boolean
  /** The options of this request's cache calls (the route's, and the request's tags); throws on bad tags. */
  readonly callOptions: CallOptions
  /** Did the handler's run change what request it answered (URL rewritten, method overridden)? */
  alteredSince(): boolean
  /** Runs the handler once, into a buffer; a second call returns the first run's end. */
  runHandler(options: RunHandlerOptions): Promise<CaptureEnd>
  /** Answer the request as if the route were uncached (see each implementation). */
  failOpen(): Promise<void>
  /**
   * Answers the client with the response about to be stored, then says whether it may
   * still be stored given the headers that went out. `undefined`: answered already.
   */
  answerBeforeStoring(stored: StoredResponse, status?: CacheStatus): boolean | undefined
  /** Do the headers that went out with this request's own response still allow storing it? */
  sentStorable(own: HeaderList): boolean
  /** Sends a stored response with its current Age; false if the client was answered already. */
  replayStored(stored: StoredResponse, status: CacheStatus): boolean
  /** Sends what this request's own handler produced. */
  replayOwn(response: Replayable, status: CacheStatus | undefined, conditional?: boolean): boolean
  /** Tells the route's `onError`. */
  reportError(error: unknown): void
}

/**
 * `X-Cache` and `Cache-Status` (RFC 9211) for an answer, as the route enables them;
 * `note` says why the request went forward, and `stored` gives a hit its ttl.
 */
export function statusHeaders(
  settings: Pick<RouteSettings, 'xCacheHeader' | 'cacheStatus'>,
  note: ExchangeNote,
  status: CacheStatus,
  stored?: StoredResponse,
): HeaderList {
  const headers: HeaderList = []
  if (settings.xCacheHeader) headers.push(['X-Cache', status])
  const name = settings.cacheStatus
  if (name === undefined) return headers
  let outcome: CacheOutcome
  if (status === 'HIT' || status === 'STALE') {
    outcome = note.collapsed ? { fwd: note.fwd ?? 'uri-miss', collapsed: true } : { hit: true }
    if (stored?.freshUntil !== undefined) outcome.ttl = (stored.freshUntil - Date.now()) / 1000
    if (status === 'STALE') outcome.detail = note.detail ?? 'stale'
  } else {
    outcome = { fwd: note.fwd ?? 'uri-miss', ...(status === 'BYPASS' ? {} : { stored: true }) }
    if (note.fwdStatus !== undefined) outcome.fwdStatus = note.fwdStatus
    if (note.detail !== undefined && status === 'BYPASS') outcome.detail = note.detail
  }
  headers.push(['Cache-Status', cacheStatusValue(name, outcome)])
  return headers
}

/** The status headers of a request that passes by uncached (`X-Cache: BYPASS`, `Cache-Status` with `reason`). */
export function bypassHeaders(
  settings: Pick<RouteSettings, 'xCacheHeader' | 'cacheStatus'>,
  reason?: string,
): HeaderList {
  const headers: HeaderList = []
  if (settings.xCacheHeader) headers.push(['X-Cache', 'BYPASS'])
  if (settings.cacheStatus !== undefined)
    headers.push([
      'Cache-Status',
      cacheStatusValue(settings.cacheStatus, {
        fwd: reason ? forwardOf(reason) : 'bypass',
        ...(reason ? { detail: reason } : { detail: 'error' }),
      }),
    ])
  return headers
}
