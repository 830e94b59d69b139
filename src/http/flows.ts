import type { LoadResult } from '../cache/call.js'
import { RemoteLoaderError } from '../errors.js'
import type { HttpExchange } from './exchange.js'
import { variantKey } from './key.js'
import { admitsVariant, HandlerFailedError, urlLoader, variantLoader } from './loaders.js'
import { invalidates, namedTargets } from './invalidation.js'
import { judgeResponse } from './response-policy.js'
import type { RequestVerdict } from './storability.js'
import { ownForm, storedForm } from './stored-form.js'
import { cachedForm, routeEntryOf } from './stored-response.js'

/**
 * What each kind of request goes through. Every flow fails open: an error from the
 * cache is reported (`onError`) and the request is answered by its own handler.
 */

/**
 * GET/HEAD: look up the URL key, then the variant key if the URL has variants. A miss
 * elects one request (across processes) to run its handler; see loaders.ts.
 */
export async function serveCached<Req>(exchange: HttpExchange<Req>): Promise<void> {
  const { cache, key, req } = exchange
  for (let attempt = 0; ; attempt++) {
    try {
      let found = await cache.getOrLoadResult<unknown>(key, urlLoader(exchange), exchange.callOptions)
      const list = routeEntryOf(found.value)
      if (list?.kind === 'variants' && !ranOwnHandler(exchange, found)) {
        const variant = variantKey(key, list.generation, list.headers, req)
        // A new variant past maxVariantsPerUrl passes by: nothing stored, nothing evicted.
        if (!admitsVariant(list, variant, exchange.settings.maxVariantsPerUrl)) {
          exchange.note.detail = 'variant-limit'
          return await exchange.failOpen()
        }
        found = await cache.getOrLoadResult<unknown>(
          variant,
          variantLoader(exchange, list, variant),
          exchange.callOptions,
        )
      }
      if (ranOwnHandler(exchange, found)) return await answerWithOwnResponse(exchange)
      if (found.outcome === 'coalesced') exchange.note.collapsed = true
      const entry = routeEntryOf(found.value)
      if (entry?.kind !== 'response') throw new TypeError(`cacheRoute: unexpected value at "${key}"`)
      // Kept only to be revalidated (no-cache, must-revalidate, ...): never served stale, even
      // when the core would (its refresh failed, a wait timed out). Answered by its own handler.
      const { mustRevalidate, freshUntil } = entry.response
      if (mustRevalidate && (found.outcome === 'stale' || (freshUntil !== undefined && freshUntil <= Date.now()))) {
        exchange.note.detail = 'must-revalidate'
        return await exchange.failOpen()
      }
      exchange.replayStored(entry.response, found.outcome === 'stale' ? 'STALE' : 'HIT')
      return
    } catch (error) {
      // The leader's handler failed (5xx, thrown, broken) and no stale response covers it.
      // A waiter queues once more, behind one new leader, instead of every waiter running
      // its handler at once; if that one fails too, each runs its own.
      if (isHandlerFailure(error) && !exchange.handlerStarted && attempt === 0) continue
      if (!isHandlerFailure(error)) exchange.reportError(error)
      await exchange.failOpen()
      return
    }
  }
}

/** HandlerFailedError, here or (by name, over pub/sub) from another process's leader. */
function isHandlerFailure(error: unknown): boolean {
  return (
    error instanceof HandlerFailedError ||
    (error instanceof RemoteLoaderError && error.remoteName === HandlerFailedError.name)
  )
}

/**
 * A request with `Authorization` on a route that did not opt in: never served from
 * the cache. Its response is stored for everyone only when it says it is shared
 * (`public`, `s-maxage`, `must-revalidate`; RFC 9111 §3.5) and has no variants.
 */
export async function serveAuthorized<Req>(exchange: HttpExchange<Req>): Promise<void> {
  const { cache, settings, key } = exchange
  Object.assign(exchange.note, { fwd: 'request', detail: 'authorization' })
  let answered = false
  // Answered as the handler ends, synchronously (see judgeAndAnswer in loaders.ts).
  const end = await exchange.runHandler({
    asOrigin: true,
    completed: (snapshot) => (answered = exchange.replayOwn(ownForm(snapshot, exchange.upstreamHeaders), 'BYPASS')),
  })
  if (end.kind !== 'complete' || exchange.alteredSince()) return
  const verdict = judgeResponse(end.response, settings, true)
  if (!verdict.storable || verdict.vary.length > 0 || settings.fixedVariantHeaders.length > 0) return
  if (!answered || !exchange.sentStorable(end.response.headers)) return // an upstream hook added Set-Cookie as it went out
  const response = storedForm(end.response, exchange.upstreamHeaders, settings.etag)
  if (verdict.mustRevalidate) response.mustRevalidate = true
  let options
  try {
    options = exchange.callOptions // the route's tags function may throw: the client has its answer already
  } catch (error) {
    return exchange.reportError(error)
  }
  await cache
    .set(key, cachedForm({ kind: 'response', response }), { ...options, ...verdict.life })
    .catch((error) => exchange.reportError(error))
}

/**
 * POST/PUT/PATCH/DELETE: the handler runs as usual. A 2xx/3xx answer invalidates the
 * URL's `keys` (and so all their variants) before the client sees the answer, so the
 * client's next GET cannot be served the old entry (RFC 9111 §4.4).
 */
export async function serveUnsafe<Req>(
  exchange: HttpExchange<Req>,
  verdict: Extract<RequestVerdict, { action: 'invalidate' }>,
): Promise<void> {
  let keys = verdict.keys
  const invalidate = async () => {
    await Promise.all(keys.map((key) => exchange.cache.delete(key).catch((error) => exchange.reportError(error))))
  }
  const end = await exchange.runHandler({
    asOrigin: false,
    // Released mid-response (large or slow): the status may be unknown yet, so invalidate anyway.
    beforeFlush: (status) => (status === undefined || invalidates(status) ? invalidate() : Promise.resolve()),
  })
  if (end.kind !== 'complete') return
  if (invalidates(end.response.status)) {
    const { origin, keysOf } = verdict
    if (origin && keysOf)
      for (const named of namedTargets(end.response.headers, origin.target, origin.host, origin.scheme))
        keys = [...keys, ...keysOf(named)]
    await invalidate()
  }
  exchange.replayOwn(ownForm(end.response, exchange.upstreamHeaders), undefined, false)
}

/** Did this very request's handler produce the value? Then its client gets that response. */
function ranOwnHandler<Req>(exchange: HttpExchange<Req>, found: LoadResult<unknown>): boolean {
  return found.outcome === 'loaded' && exchange.handlerStarted
}

async function answerWithOwnResponse<Req>(exchange: HttpExchange<Req>): Promise<void> {
  const end = await exchange.runHandler({ asOrigin: true }) // already run: its result
  if (end.kind !== 'complete') return // streamed to the client (or, with no client left, dropped)
  const stored = exchange.storedOwn
  if (stored)
    exchange.replayStored(stored, 'MISS') // the loader answered already (answerBeforeStoring): a no-op
  else exchange.replayOwn(ownForm(end.response, exchange.upstreamHeaders), 'BYPASS')
}
