import { ServerResponse } from 'node:http'
import { finished } from 'node:stream/promises'
import type { Cache } from '../cache/cache.js'
import { HeaderMap, type HeaderList } from '../http/headers.js'
import type { OriginRequest } from '../http/origin-exchange.js'
import type { RouteCacheOptions } from '../http/options.js'
import type { HttpRequest } from '../http/request.js'
import { HttpCacheRoute } from '../http/route.js'
import type { KoaContextLike, KoaMiddlewareLike, KoaNextLike } from './context.js'
import { answerOnContext } from './replay.js'
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
  const route = new HttpCacheRoute<KoaContextLike>(cache, options)
  return async function cacheRouteMiddleware(ctx: KoaContextLike, next: KoaNextLike): Promise<void> {
    // Fields set above us (before their `await next()`): per request, never stored.
    const upstream = HeaderMap.from(ctx.res.getHeaders()).toList()
    const head = ctx.method.toUpperCase() === 'HEAD'
    const answer = await route.serve(
      ctx,
      requestView(ctx),
      (request) => runDownstream(ctx, next, request, upstream),
      upstream,
    )
    if (answer.handlerError !== undefined) throw answer.handlerError // Koa's error handling answers
    answerOnContext(ctx, answer, head)
  }
}

/**
 * Runs the downstream (`await next()`) for `request` and reads what it left on ctx. A
 * background run (stale-while-revalidate: this request's client was answered from the
 * cache) waits for that answer to go out, then runs on a response of its own that is
 * never sent, since Koa cannot set a ctx again once its head went out.
 */
async function runDownstream(ctx: KoaContextLike, next: KoaNextLike, request: OriginRequest, upstream: HeaderList) {
  if (request.background) await detach(ctx, upstream)
  const { req } = ctx
  const method = req.method
  const headers = req.headers
  req.method = request.method
  req.headers = request.headers as typeof headers
  try {
    await next()
  } finally {
    if (!request.background) {
      req.method = method
      req.headers = headers
    }
  }
  const origin = koaOriginOf(ctx) // sets what Koa's respond() would (JSON's Content-Length)
  return { ...origin, headers: HeaderMap.from(ctx.res.getHeaders()).toList() }
}

/** Koa's response internals that a detached run starts afresh. */
interface KoaResponseInternals {
  res: ServerResponse
  _body?: unknown
  _explicitStatus?: boolean
  _explicitNullBody?: boolean
}

/** A response of its own for a background run, with the fields set above the cache, as the request had them. */
async function detach(ctx: KoaContextLike, upstream: HeaderList): Promise<void> {
  await finished(ctx.res, { readable: false }).catch(() => {})
  const res = new ServerResponse(ctx.req)
  res.statusCode = 404 // Koa's default until a body or status is set
  for (const [name, value] of upstream) res.setHeader(name, value)
  ctx.res = res
  const response = (ctx as { response?: KoaResponseInternals }).response
  if (response) {
    response.res = res
    response._body = undefined
    response._explicitStatus = false
    response._explicitNullBody = false
  }
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
  const atRoot = ctx.url === '/' || ctx.url.startsWith('/?')
  return !(mount !== '' && atRoot && mount + ctx.url.slice(1) === ctx.originalUrl)
}
