import { randomBytes } from 'node:crypto'
import type { Loader, LoaderContext } from '../context.js'
import { StampedeGuardError } from '../errors.js'
import type { Exchange } from './exchange.js'
import { canonicalHeaderNames, variantKey } from './key.js'
import { isFailure, judgeResponse, type Lifetimes } from './storability.js'
import { storedForm } from './stored-form.js'
import {
  cachedForm,
  routeEntryOf,
  UNCACHED,
  type RouteEntry,
  type StoredResponse,
  type VariantList,
} from './stored-response.js'

/**
 * The two loaders a cached GET uses: one for the URL key, one for a variant key.
 * Each runs this request's handler through the capture and decides what the core
 * stores. Whatever may not be stored is never shared: `doNotCache({ share: false })`
 * makes every waiting request, in every process, run its own handler (rule 15).
 */

/**
 * The handler failed for the moment: a 5xx (a throw reaches us as Express's 500), a
 * response cut off after its head went out (the socket was destroyed), or a body shorter
 * or longer than its Content-Length. Thrown from the loader, so the core serves a stale
 * response if it has one (stale-if-error), and otherwise stores nothing and tells the
 * waiters, which then queue behind one new leader (flows.ts): a failure is not a
 * property of the URL, so it gets no hit-for-miss, and coalescing holds while the origin
 * struggles. Never stored, so no waiter gets it.
 */
export class HandlerFailedError extends StampedeGuardError {
  constructor(readonly failure: number | 'broken' | 'truncated') {
    super(
      'ERR_SG_HANDLER_FAILED',
      typeof failure === 'number'
        ? `the route handler answered ${failure}`
        : `the route handler's response was ${failure}`,
    )
  }
}

/** What the handler produced, judged. */
type Produced =
  | { storable: false; entry: RouteEntry }
  | { storable: true; response: StoredResponse; life: Lifetimes; variantHeaders: string[] }

/** The loader for the URL key: a response, or the list of headers its variants are keyed on. */
export function urlLoader(exchange: Exchange): Loader<unknown> {
  return asCacheLoader(async (context, stale) => {
    // A stale variant list is still right (a Vary change is caught per variant, see
    // variantLoader): keep it, without running the handler for nothing.
    if (stale?.kind === 'variants') {
      context.cacheFor(stale.life)
      return stale
    }
    if (unobservable(exchange, context)) return skipped(context)
    const produced = await produce(exchange, context)
    if (!produced.storable) return produced.entry
    const { response, life, variantHeaders } = produced
    const refusal = refusedAsSent(exchange, context, response)
    if (refusal) return refusal
    exchange.storedOwn = response
    if (variantHeaders.length === 0) {
      context.cacheFor(life)
      return { kind: 'response', response }
    }
    // Store our own variant first, so requests woken by the list find it. The list lives
    // exactly as long as that variant (ttl + grace + staleIfError), never longer: one
    // list per distinct URL must not outlive what it lists (junk query strings).
    const list: VariantList = {
      kind: 'variants',
      generation: randomBytes(6).toString('base64url'),
      headers: variantHeaders,
      life: { ...life, ttl: life.ttl ?? exchange.settings.ttl },
    }
    const key = variantKey(exchange.key, list.generation, list.headers, exchange.req)
    await exchange.cache
      .set(key, cachedForm({ kind: 'response', response }), { ...exchange.callOptions, ...life })
      .catch((error) => exchange.reportError(error))
    context.cacheFor(list.life)
    return list
  })
}

/** The loader for one variant of a URL whose variant list is `list`. */
export function variantLoader(exchange: Exchange, list: VariantList): Loader<unknown> {
  return asCacheLoader(async (context) => {
    if (unobservable(exchange, context)) return skipped(context)
    const produced = await produce(exchange, context)
    if (!produced.storable) return produced.entry
    // Vary now names a header the list does not key on: storing it under this key
    // would serve it to requests it does not fit. Not stored, not shared.
    if (!produced.variantHeaders.every((name) => list.headers.includes(name))) return uncacheable(exchange, context)
    const refusal = refusedAsSent(exchange, context, produced.response)
    if (refusal) return refusal
    exchange.storedOwn = produced.response
    context.cacheFor(produced.life)
    return { kind: 'response', response: produced.response }
  })
}

/** A loader of route entries as the core cache holds them (stored-response.ts), given the stale entry if any. */
function asCacheLoader(
  load: (context: LoaderContext<unknown>, stale: RouteEntry | undefined) => Promise<RouteEntry>,
): Loader<unknown> {
  return async (context) => cachedForm(await load(context, routeEntryOf(context.staleValue)))
}

async function produce(exchange: Exchange, context: LoaderContext<unknown>): Promise<Produced> {
  const end = await exchange.runHandler({ asOrigin: true })
  if (end.kind === 'released') {
    if (end.reason === 'broken' || end.reason === 'truncated') throw new HandlerFailedError(end.reason)
    // Too large or streamed: the client got it directly, and so will the next ones
    // (hit-for-miss). A timeout or a full capture budget is not a property of the URL.
    return {
      storable: false,
      entry: uncacheable(exchange, context, end.reason === 'too-large' || end.reason === 'streamed'),
    }
  }
  const snapshot = end.response
  // The URL the router matched was rewritten while the handler ran (an SPA fallback after
  // cacheRoute): what it produced belongs to another URL. Not stored, not shared.
  if (exchange.rewrittenSince()) return { storable: false, entry: uncacheable(exchange, context, false) }
  const verdict = judgeResponse(snapshot, exchange.settings)
  if (!verdict.storable) {
    if (isFailure(snapshot.status)) throw new HandlerFailedError(snapshot.status)
    // Uncacheable by nature (Set-Cookie, private, no-store, Vary: *, its status): hit-for-miss.
    return { storable: false, entry: uncacheable(exchange, context) }
  }
  // The core stores nothing from this run (hit-for-miss, a follower of a response that
  // was not shared): the client gets BYPASS, and no variant is written either.
  if (context.uncached) return { storable: false, entry: uncacheable(exchange, context) }
  return {
    storable: true,
    response: storedForm(snapshot, exchange.upstreamHeaders, exchange.settings.etag),
    life: verdict.life,
    variantHeaders: canonicalHeaderNames([...exchange.settings.fixedVariantHeaders, ...verdict.vary]),
  }
}

/**
 * The last word on a response judged storable: its client is answered first (MISS), so
 * that on-headers hooks of middleware before cacheRoute run, and what they added is
 * judged too (see RouteState). Undefined: store it. When the client was answered
 * already (a soft timeout served it stale), the hooks cannot be seen: stored unless
 * this route's hooks have been seen adding a Set-Cookie.
 */
function refusedAsSent(
  exchange: Exchange,
  context: LoaderContext<unknown>,
  response: StoredResponse,
): RouteEntry | undefined {
  const storable = exchange.answerBeforeStoring(response)
  if (storable === false) return uncacheable(exchange, context)
  if (storable === undefined && exchange.route.upstreamForbidsStoring) return uncacheable(exchange, context, false)
  return undefined
}

/** A background refresh on a route whose upstream hooks add Set-Cookie: its response could not be judged as sent. */
function unobservable(exchange: Exchange, context: LoaderContext<unknown>): boolean {
  return context.background && exchange.route.upstreamForbidsStoring
}

/** The handler is not run for nothing: the stale response stays until its window ends, then the next miss runs in the foreground. */
function skipped(context: LoaderContext<unknown>): RouteEntry {
  context.doNotCache({ share: false })
  return UNCACHED
}

/** Not stored, not shared, and (by default) remembered briefly as hit-for-miss. */
function uncacheable(exchange: Exchange, context: LoaderContext<unknown>, hitForMiss = true): RouteEntry {
  exchange.storedOwn = undefined
  context.doNotCache({ share: false, passFor: hitForMiss ? exchange.settings.hitForMiss : 0 })
  return UNCACHED
}
