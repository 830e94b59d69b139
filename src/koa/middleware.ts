import { Readable } from 'node:stream'
import type { Cache } from '../cache/cache.js'
import { resolvePolicy } from '../settings.js'
import { AnswerExchange, type Answer, type YieldingHandler } from '../http/answer-exchange.js'
import { bypassHeaders, type RouteState } from '../http/exchange.js'
import { serveAuthorized, serveCached, serveUnsafe } from '../http/flows.js'
import { HeaderMap, type HeaderList } from '../http/headers.js'
import { resolveRouteOptions, type RouteCacheOptions, type RouteSettings } from '../http/options.js'
import type { HttpRequest } from '../http/request.js'
import { classifyRequest } from '../http/storability.js'
import type { KoaContextLike, KoaMiddlewareLike, KoaNextLike } from './context.js'
import { replayOnContext } from './replay.js'
import { koaOriginOf } from './response.js'

/** Options of one cached Koa route (see docs/express.md#options; callbacks receive the Koa context). */
export type KoaCacheRouteOptions = RouteCacheOptions<KoaContextLike>

/**
 * Koa middleware that caches the responses of the middleware downstream of it, in
 * `cache`, shared by every process using the same Redis (and with the Express, Fastify,
 * Hono and NestJS adapters: one stored form):
 *
 * ```ts
 * app.use(cacheRoute(cache, { ttl: '10s', staleTtl: '1m' }))
 * ```
 *
 * On a miss exactly one request runs the downstream; the others wait for its stored
 * response or get a stale one. See docs/koa.md. Options are validated here, at startup.
 */
export function cacheRoute(cache: Cache, options: KoaCacheRouteOptions): KoaMiddlewareLike {
  const settings = resolveRouteOptions(options)
  resolvePolicy(undefined, settings.callOptions) // fail fast on a bad resilience option, too
  // Koa answers when its chain returns, and a ctx cannot be set again after: no response can
  // be produced for a client already answered, so no background refresh (docs/koa.md).
  const route: RouteState = { upstreamForbidsStoring: true }

  return async function cacheRouteMiddleware(ctx: KoaContextLike, next: KoaNextLike): Promise<void> {
    let verdict
    try {
      verdict = classifyRequest(requestView(ctx), ctx, settings)
    } catch (error) {
      report(settings, error, ctx)
      return passThrough(ctx, next, bypassHeaders(settings))
    }
    if (verdict.action === 'ignore') {
      await next()
      return
    }
    if (verdict.action === 'bypass') return passThrough(ctx, next, bypassHeaders(settings, verdict.reason))
    const key = verdict.action === 'invalidate' ? verdict.keys[0]! : verdict.key
    const upstream = HeaderMap.from(ctx.res.getHeaders()).toList()
    const exchange = new AnswerExchange(
      ctx,
      { headers: ctx.req.headers, method: ctx.method },
      downstream(ctx, next),
      cache,
      settings,
      route,
      key,
      upstream,
    )
    const flow =
      verdict.action === 'cache'
        ? serveCached(exchange)
        : verdict.action === 'invalidate'
          ? serveUnsafe(exchange, verdict)
          : serveAuthorized(exchange)
    void flow
      .catch((error: unknown) => {
        exchange.reportError(error)
        return exchange.failOpen()
      })
      .finally(() => {
        if (!exchange.isAnswered) void exchange.failOpen()
      })
    await apply(ctx, await exchange.answered, next, exchange.head)
  }
}

/** The downstream as the engine runs it: `await next()`, then what it left on ctx. */
function downstream(ctx: KoaContextLike, next: KoaNextLike): YieldingHandler {
  return {
    headers: ctx.req.headers,
    method: { get: () => ctx.method, set: (method) => (ctx.method = method) },
    routedUrl: () => ctx.url,
    async produce() {
      await next()
      const origin = koaOriginOf(ctx) // sets what Koa's respond() would (Content-Length of JSON)
      return { ...origin, headers: HeaderMap.from(ctx.res.getHeaders()).toList() }
    },
  }
}

/** Puts the answer on ctx (Koa sends it when the chain returns), or runs the downstream uncached. */
async function apply(ctx: KoaContextLike, answer: Answer, next: KoaNextLike, head: boolean): Promise<void> {
  switch (answer.kind) {
    case 'plan':
      return replayOnContext(ctx, answer.plan, head)
    case 'stream': {
      const body = answer.body instanceof Readable ? answer.body : Readable.from(answer.body)
      if (ctx.body !== body) ctx.body = body
      for (const [name, value] of answer.headers) ctx.set(name, value)
      ctx.status = answer.status
      if (answer.statusMessage !== undefined) ctx.message = answer.statusMessage
      return
    }
    case 'pass':
      return passThrough(ctx, next, answer.headers)
    case 'error':
      throw answer.error
  }
}

async function passThrough(ctx: KoaContextLike, next: KoaNextLike, headers: HeaderList): Promise<void> {
  for (const [name, value] of headers) ctx.set(name, value)
  await next()
}

/** The request as the engine sees it, with what only Koa knows (koa-mount's prefix, a rewritten ctx.url). */
function requestView(ctx: KoaContextLike): HttpRequest {
  return {
    method: ctx.method,
    url: ctx.originalUrl,
    headers: ctx.req.headers,
    scheme: ctx.protocol,
    rewritten: isRewritten(ctx),
  }
}

/** Did middleware above us rewrite ctx.url (beyond koa-mount moving its prefix to ctx.mountPath)? */
function isRewritten(ctx: KoaContextLike): boolean {
  const mount = ctx.mountPath ?? ''
  if (mount + ctx.url === ctx.originalUrl) return false
  // Mounted at its own root, `/api` is seen as mountPath `/api` and url `/`.
  return !(
    mount !== '' &&
    (ctx.url === '/' || ctx.url.startsWith('/?')) &&
    mount + ctx.url.slice(1) === ctx.originalUrl
  )
}

function report(settings: RouteSettings<KoaContextLike>, error: unknown, ctx: KoaContextLike): void {
  try {
    settings.onError(error, ctx)
  } catch {
    // an observer that throws must not break the request
  }
}
