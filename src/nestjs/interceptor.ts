import type { IncomingMessage } from 'node:http'
import { RequestMethod } from '@nestjs/common'
import { from, lastValueFrom, type Observable } from 'rxjs'
import type { Cache } from '../cache/cache.js'
import { HeaderMap, headerOf } from '../http/headers.js'
import { invalidates } from '../http/invalidation.js'
import { resolveRouteOptions, type RouteCacheOptions, type RouteSettings } from '../http/options.js'
import type { OriginRequest } from '../http/origin-exchange.js'
import type { HttpRequest } from '../http/request.js'
import { HttpCacheRoute } from '../http/route.js'
import {
  CACHE_ROUTE_METADATA,
  INVALIDATE_TAGS_METADATA,
  metadataOf,
  type NestCacheRouteDecoratorOptions,
  type TagSource,
} from './metadata.js'
import { nestOriginOf } from './serialize.js'
import type { CallHandlerLike, ExecutionContextLike, NestRequestLike, NestResponseLike } from './shapes.js'
import { answerFor } from './send.js'

// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type -- Nest's handlers and classes
type Target = Function

/** One marked route: the engine behind it. */
interface CachedRoute {
  http: HttpCacheRoute<NestRequestLike>
}

/**
 * Nest interceptor that caches the routes marked `@CacheRoute(...)` in `cache`, shared
 * by every process using the same Redis (and with the Express, Fastify, Koa and Hono
 * adapters: one stored form), and drops the tags of `@InvalidateTags(...)` after a
 * successful write. Routes marked with neither pass through untouched.
 *
 * ```ts
 * app.useGlobalInterceptors(new CacheRouteInterceptor(cache, { staleTtl: '1m' }))
 * ```
 *
 * `defaults` are options every marked route starts from (a route's own win). Works on
 * `@nestjs/platform-express` and `@nestjs/platform-fastify`. See docs/nestjs.md.
 */
export class CacheRouteInterceptor {
  private readonly routes = new WeakMap<Target, Map<Target, CachedRoute>>()

  constructor(
    readonly cache: Cache,
    private readonly defaults: NestCacheRouteDecoratorOptions = {},
  ) {
    resolveRouteOptions({ ttl: 1, ...defaults }) // checked now, at startup
  }

  intercept<Result>(context: ExecutionContextLike, next: CallHandlerLike<Result>): Result {
    if (context.getType() !== 'http') return next.handle()
    const handler = context.getHandler()
    let options =
      metadataOf<NestCacheRouteDecoratorOptions>(CACHE_ROUTE_METADATA, handler) ??
      metadataOf<NestCacheRouteDecoratorOptions>(CACHE_ROUTE_METADATA, context.getClass())
    const tags = metadataOf<TagSource[]>(INVALIDATE_TAGS_METADATA, handler)
    // @Redirect() and @Render(): Nest builds the response after the interceptor, from the
    // value (a redirect target, a template's locals), so there is no response to capture.
    if (options && builtAfter(handler)) options = undefined
    if (!options && !tags) return next.handle()
    const http = context.switchToHttp()
    const req = http.getRequest() as NestRequestLike
    const res = http.getResponse() as NestResponseLike
    const handled = next as unknown as CallHandlerLike<Observable<unknown>>
    if (!options) return this.invalidating(req, res, handler, tags!, handled) as Result
    const route = this.routeOf(context.getClass(), handler, options)
    // One Observable of the promised value: a rejection (the handler's own error) reaches Nest's filters.
    return from(this.serve(route, req, res, handler, tags, handled)) as Result
  }

  private routeOf(controller: Target, handler: Target, options: NestCacheRouteDecoratorOptions): CachedRoute {
    let byHandler = this.routes.get(controller)
    if (!byHandler) this.routes.set(controller, (byHandler = new Map()))
    let route = byHandler.get(handler)
    if (!route) {
      const merged = { ...this.defaults, ...options } as RouteCacheOptions<NestRequestLike>
      route = { http: new HttpCacheRoute<NestRequestLike>(this.cache, merged) }
      byHandler.set(handler, route)
    }
    return route
  }

  /** A route with @InvalidateTags only: its tags are dropped after a 2xx/3xx, before the answer goes out. */
  private invalidating(
    req: NestRequestLike,
    res: NestResponseLike,
    handler: Target,
    tags: TagSource[],
    next: CallHandlerLike<Observable<unknown>>,
  ): Observable<unknown> {
    return from(
      (async () => {
        const value = await lastValueFrom(next.handle(), { defaultValue: undefined })
        const status = value instanceof Response ? value.status : routeStatus(req, handler)
        if (invalidates(status)) await this.dropTags(tags, req)
        return value
      })(),
    )
  }

  private async dropTags(tags: TagSource[], req: NestRequestLike, onError?: (error: unknown) => void): Promise<void> {
    const names = tags.flatMap((tag) => (typeof tag === 'function' ? [...[tag(req)].flat()] : [tag]))
    await Promise.all(
      names.map((tag) =>
        this.cache.deleteByTag(tag).catch((error: unknown) => {
          if (onError) onError(error)
          else throw error
        }),
      ),
    )
  }

  private async serve(
    route: CachedRoute,
    req: NestRequestLike,
    res: NestResponseLike,
    handler: Target,
    tags: TagSource[] | undefined,
    next: CallHandlerLike<Observable<unknown>>,
  ): Promise<unknown> {
    const raw = (req.raw ?? req) as IncomingMessage
    const request: HttpRequest = {
      method: req.method,
      url: req.originalUrl ?? req.url,
      headers: raw.headers,
      scheme: req.protocol,
      // Middleware (Express) or rewriteUrl (Fastify) changed the URL the router matched:
      // the response belongs to what drove the rewrite, not to the URL asked.
      rewritten: req.originalUrl !== undefined && req.url !== req.originalUrl,
      // A @Head() handler of its own: never run as the GET's fetch (its empty body would be stored for GET).
      ownHeadHandler: metadataOf<number>('method', handler) === RequestMethod.HEAD,
    }
    const upstream = HeaderMap.from(res.getHeaders()).toList()
    const head = request.method.toUpperCase() === 'HEAD'
    const platform = res.raw ? 'fastify' : 'express'
    const answer = await route.http.serve(
      req,
      request,
      async (originRequest) => {
        const unsafe = !['GET', 'HEAD'].includes(request.method.toUpperCase())
        const value = await asOrigin(raw, originRequest, () =>
          lastValueFrom(next.handle(), { defaultValue: undefined }),
        )
        const status = value instanceof Response ? value.status : routeStatus(req, handler)
        const origin = nestOriginOf(value, status, platform)
        if (tags && unsafe && invalidates(origin.status))
          await this.dropTags(tags, req, (error) => report(route.http.settings, error, req))
        // In the background the response went out already: its fields are the stale answer's.
        const headers = HeaderMap.from(originRequest.background ? upstream : res.getHeaders())
        for (const [name, field] of origin.headers) headers.set(name, field)
        if (origin.defaultType && headerOf(headers.toList(), 'content-type') === undefined)
          headers.set('Content-Type', origin.defaultType)
        if (Buffer.isBuffer(origin.body) && headerOf(headers.toList(), 'content-length') === undefined)
          headers.set('Content-Length', String(origin.body.length))
        return { status: origin.status, headers: headers.toList(), body: origin.body }
      },
      upstream,
    )
    if (answer.handlerError !== undefined) throw answer.handlerError // Nest's filters answer
    return answerFor(answer, res, { head, routeStatus: routeStatus(req, handler), headers: request.headers })
  }
}

/**
 * Runs the handler with the request the cache fetches with (HEAD as GET, the client's
 * validators hidden, Accept-Encoding reduced: see OriginRequest), then puts the client's
 * back, unless the run is in the background (its client was answered already).
 */
async function asOrigin<T>(raw: IncomingMessage, request: OriginRequest, run: () => Promise<T>): Promise<T> {
  const { method, headers } = raw
  raw.method = request.method
  raw.headers = request.headers as IncomingMessage['headers']
  try {
    return await run()
  } finally {
    if (!request.background) {
      raw.method = method
      raw.headers = headers
    }
  }
}

/** Does Nest build this handler's response from its value after the interceptors ran (@Redirect, @Render)? */
function builtAfter(handler: Target): boolean {
  return metadataOf('__redirect__', handler) !== undefined || metadataOf('__renderTemplate__', handler) !== undefined
}

/** The status Nest sends a handler's value with: `@HttpCode()`, else 201 for POST and 200 otherwise. */
function routeStatus(req: NestRequestLike, handler: Target): number {
  return metadataOf<number>('__httpCode__', handler) ?? (req.method.toUpperCase() === 'POST' ? 201 : 200)
}

function report(settings: RouteSettings<NestRequestLike>, error: unknown, req: NestRequestLike): void {
  try {
    settings.onError(error, req)
  } catch {
    // an observer that throws must not break the request
  }
}
