import { randomBytes } from 'node:crypto'
import type { Loader, LoaderContext } from '../context.js'
import { StampedeGuardError } from '../errors.js'
import type { HttpExchange } from './exchange.js'
import { canonicalHeaderNames, variantKey } from './key.js'
import { isFailure, judgeResponse, type Lifetimes } from './response-policy.js'
import { headerOf, withoutFields } from './headers.js'
import { conditionalFor, updatedByNotModified } from './revalidation.js'
import { ownForm, storedForm } from './stored-form.js'
import {
  cachedForm,
  routeEntryOf,
  UNCACHED,
  type ResponseSnapshot,
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

/**
 * What the handler produced, judged. `sentStorable`: the client was answered with it as it
 * ended; do the headers that went out still allow storing it (undefined: the client had
 * been answered already, so they could not be seen)?
 */
type Produced =
  | { storable: false; entry: RouteEntry }
  | {
      storable: true
      response: StoredResponse
      life: Lifetimes
      variantHeaders: string[]
      sentStorable: boolean | undefined
    }

/** A judged response, or the failure to throw once the handler's promise settles. */
type Judged = { produced: Produced } | { failure: number }

/** The loader for the URL key: a response, or the list of headers its variants are keyed on. */
export function urlLoader<Req>(exchange: HttpExchange<Req>): Loader<unknown> {
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
    const refusal = refusedAsSent(exchange, context, produced.sentStorable)
    if (refusal) return refusal
    exchange.storedOwn = response
    if (variantHeaders.length === 0) {
      context.cacheFor(life)
      return { kind: 'response', response }
    }
    // Store our own variant first, so requests woken by the list find it. The list lives
    // exactly as long as that variant (ttl + grace + staleIfError), never longer: one
    // list per distinct URL must not outlive what it lists (junk query strings).
    const generation = randomBytes(6).toString('base64url')
    const key = variantKey(exchange.key, generation, variantHeaders, exchange.req)
    const list: VariantList = {
      kind: 'variants',
      generation,
      headers: variantHeaders,
      variants: [key],
      life: { ...life, ttl: life.ttl ?? exchange.settings.ttl },
    }
    await exchange.cache
      .set(key, cachedForm({ kind: 'response', response }), { ...exchange.callOptions, ...life })
      .catch((error) => exchange.reportError(error))
    context.cacheFor(list.life)
    return list
  })
}

/**
 * May `variant` be looked up (and stored) under `list`? Yes if it is listed, or the list
 * has room. Lists are updated by read-modify-write without a lock, so concurrent first
 * requests for new variants may each add theirs: the bound can be passed by as many.
 */
export function admitsVariant(list: VariantList, variant: string, maxVariants: number): boolean {
  const known = list.variants
  return known === undefined || known.includes(variant) || known.length < maxVariants
}

/** Records a newly stored variant in its URL's list, so the next requests count it. */
async function recordVariant<Req>(exchange: HttpExchange<Req>, list: VariantList, variant: string): Promise<void> {
  if (list.variants === undefined || list.variants.includes(variant)) return
  const updated: VariantList = { ...list, variants: [...list.variants, variant] }
  await exchange.cache
    .set(exchange.key, cachedForm(updated), { ...exchange.callOptions, ...list.life })
    .catch((error) => exchange.reportError(error))
}

/** The loader for one variant (key `variant`) of a URL whose variant list is `list`. */
export function variantLoader<Req>(exchange: HttpExchange<Req>, list: VariantList, variant: string): Loader<unknown> {
  return asCacheLoader(async (context) => {
    if (unobservable(exchange, context)) return skipped(context)
    const produced = await produce(exchange, context, list)
    if (!produced.storable) return produced.entry
    const refusal = refusedAsSent(exchange, context, produced.sentStorable)
    if (refusal) return refusal
    exchange.storedOwn = produced.response
    context.cacheFor(produced.life)
    await recordVariant(exchange, list, variant)
    return { kind: 'response', response: produced.response }
  })
}

/** A loader of route entries as the core cache holds them (stored-response.ts), given the stale entry if any. */
function asCacheLoader(
  load: (context: LoaderContext<unknown>, stale: RouteEntry | undefined) => Promise<RouteEntry>,
): Loader<unknown> {
  return async (context) => cachedForm(await load(context, routeEntryOf(context.staleValue)))
}

/**
 * A 304 to a revalidation is the stored response updated with the 304's headers (RFC 9111
 * §4.3.4), its body and status kept, its freshness counted from now.
 */
function refreshedBy<Req>(stored: StoredResponse | undefined, exchange: HttpExchange<Req>) {
  return (snapshot: ResponseSnapshot): ResponseSnapshot => {
    if (snapshot.status !== 304 || !stored) return snapshot
    exchange.note.fwdStatus = 304
    // A 304 without Date (Node adds it only as the head goes out) is as new as this moment.
    const base =
      headerOf(snapshot.headers, 'date') === undefined ? withoutFields(stored.headers, ['date']) : stored.headers
    const updated: ResponseSnapshot = {
      ...snapshot,
      status: stored.status,
      headers: updatedByNotModified(base, snapshot.headers),
      body: stored.body,
    }
    if (stored.statusMessage !== undefined) updated.statusMessage = stored.statusMessage
    return updated
  }
}

/** Runs the handler (for one variant of `list`, when given) and judges what it produced. */
async function produce<Req>(
  exchange: HttpExchange<Req>,
  context: LoaderContext<unknown>,
  list?: VariantList,
): Promise<Produced> {
  let judged: Judged | undefined
  if (list) exchange.note.fwd = 'vary-miss'
  if (context.staleValue !== undefined) exchange.note.fwd = 'stale'
  // A stale response with a validator is revalidated: the handler sees its If-None-Match /
  // If-Modified-Since, and a 304 renews it (RFC 9111 §4.3).
  const stale = routeEntryOf(context.staleValue)
  const revalidating = stale?.kind === 'response' ? stale.response : undefined
  const conditional = revalidating && conditionalFor(revalidating.headers)
  const refreshed = refreshedBy(conditional ? revalidating : undefined, exchange)
  const end = await exchange.runHandler({
    asOrigin: true,
    completed: (snapshot) => (judged = judgeAndAnswer(exchange, context, refreshed(snapshot), list)),
    ...(conditional ? { conditional } : {}),
  })
  if (end.kind === 'released') {
    if (end.reason === 'broken' || end.reason === 'truncated') throw new HandlerFailedError(end.reason)
    // Too large or streamed: the client got it directly, and so will the next ones
    // (hit-for-miss). A timeout or a full capture budget is not a property of the URL.
    return {
      storable: false,
      entry: uncacheable(exchange, context, end.reason === 'too-large' || end.reason === 'streamed'),
    }
  }
  judged ??= judgeAndAnswer(exchange, context, refreshed(end.response), list)
  if ('failure' in judged) throw new HandlerFailedError(judged.failure)
  return judged.produced
}

/**
 * Judges the handler's response the moment it ends and answers the live client there and
 * then (MISS with the stored form, or BYPASS with its own), synchronously: the same
 * response, cached or not. A failure is answered too, unless a stale response covers it
 * (stale-if-error: the core serves that instead).
 */
function judgeAndAnswer<Req>(
  exchange: HttpExchange<Req>,
  context: LoaderContext<unknown>,
  snapshot: ResponseSnapshot,
  list: VariantList | undefined,
): Judged {
  const bypass = (entry: RouteEntry): Judged => {
    exchange.replayOwn(ownForm(snapshot, exchange.upstreamHeaders), 'BYPASS')
    return { produced: { storable: false, entry } }
  }
  // The URL the router matched, or the method, changed while the handler ran (an SPA
  // fallback or method-override after cacheRoute): the response belongs to another request.
  if (exchange.alteredSince()) return bypass(uncacheable(exchange, context, false, 'altered'))
  // An HTTP error the handler threw (404, 403): its client gets the framework's rendering of
  // it, nobody else does, and no stale response stands in for it. Not a property of the URL.
  if (snapshot.thrown) return bypass(uncacheable(exchange, context, false, 'thrown'))
  const verdict = judgeResponse(snapshot, exchange.settings)
  if (!verdict.storable) {
    exchange.note.detail = verdict.reason
    if (isFailure(snapshot.status)) {
      if (context.staleValue === undefined) exchange.replayOwn(ownForm(snapshot, exchange.upstreamHeaders), 'BYPASS')
      return { failure: snapshot.status }
    }
    // Uncacheable by nature (Set-Cookie, private, no-store, Vary: *): hit-for-miss. A status
    // outside the set is not: any client can have itself refused (403, 429, a 302 to a
    // login page), and were that remembered for the URL, one refused request every
    // hitForMiss would keep everyone else's responses out of the cache. Waiters still run
    // their own handler.
    return bypass(uncacheable(exchange, context, verdict.reason !== 'status', verdict.reason))
  }
  // The core stores nothing from this run (hit-for-miss, a follower of a response that
  // was not shared): the client gets BYPASS, and no variant is written either.
  if (context.uncached) return bypass(uncacheable(exchange, context, true, 'hit-for-miss'))
  const variantHeaders = canonicalHeaderNames([...exchange.settings.fixedVariantHeaders, ...verdict.vary])
  // Vary now names a header the variant list does not key on: storing it under this key
  // would serve it to requests it does not fit. Not stored, not shared.
  if (list && !variantHeaders.every((name) => list.headers.includes(name)))
    return bypass(uncacheable(exchange, context, true, 'vary-mismatch'))
  const response = storedForm(snapshot, exchange.upstreamHeaders, exchange.settings.etag)
  response.freshUntil = response.storedAt + (verdict.life.ttl ?? exchange.settings.ttl)
  if (verdict.mustRevalidate) response.mustRevalidate = true
  return {
    produced: {
      storable: true,
      response,
      life: verdict.life,
      variantHeaders,
      sentStorable: exchange.answerBeforeStoring(response, exchange.note.fwdStatus === 304 ? 'REVALIDATED' : 'MISS'),
    },
  }
}

/**
 * The last word on a response judged storable: its client is answered first (MISS), so
 * that on-headers hooks of middleware before cacheRoute run, and what they added is
 * judged too (see RouteState). Undefined: store it. When the client was answered
 * already (a soft timeout served it stale), the hooks cannot be seen: stored unless
 * this route's hooks have been seen adding a Set-Cookie.
 */
function refusedAsSent<Req>(
  exchange: HttpExchange<Req>,
  context: LoaderContext<unknown>,
  storable: boolean | undefined,
): RouteEntry | undefined {
  if (storable === false) return uncacheable(exchange, context)
  if (storable === undefined && exchange.route.upstreamForbidsStoring) return uncacheable(exchange, context, false)
  return undefined
}

/** A background refresh on a route whose upstream hooks add Set-Cookie: its response could not be judged as sent. */
function unobservable<Req>(exchange: HttpExchange<Req>, context: LoaderContext<unknown>): boolean {
  return context.background && exchange.route.upstreamForbidsStoring
}

/** The handler is not run for nothing: the stale response stays until its window ends, then the next miss runs in the foreground. */
function skipped(context: LoaderContext<unknown>): RouteEntry {
  context.doNotCache({ share: false })
  return UNCACHED
}

/** Not stored, not shared, and (by default) remembered briefly as hit-for-miss. */
function uncacheable<Req>(
  exchange: HttpExchange<Req>,
  context: LoaderContext<unknown>,
  hitForMiss = true,
  reason?: string,
): RouteEntry {
  exchange.storedOwn = undefined
  if (reason) exchange.note.detail = reason
  context.doNotCache({ share: false, passFor: hitForMiss ? exchange.settings.hitForMiss : 0 })
  return UNCACHED
}
