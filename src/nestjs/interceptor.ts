import type { IncomingMessage } from 'node:http'
import { RequestMethod } from '@nestjs/common'
import { from, lastValueFrom, mergeMap, throwError, type Observable } from 'rxjs'
import type { Cache } from '../cache/cache.js'
import { resolvePolicy } from '../settings.js'
import { AnswerExchange, type Answer, type YieldingHandler } from '../http/answer-exchange.js'
import { bypassHeaders, type RouteState } from '../http/exchange.js'
import { serveAuthorized, serveCached, serveUnsafe } from '../http/flows.js'
import { HeaderMap, headerOf, type HeaderList } from '../http/headers.js'
import { invalidates } from '../http/invalidation.js'
import { resolveRouteOptions, type RouteSettings } from '../http/options.js'
import { classifyRequest } from '../http/storability.js'
import {
  CACHE_ROUTE_METADATA,
  INVALIDATE_TAGS_METADATA,
  metadataOf,
  type NestCacheRouteDecoratorOptions,
  type TagSource,
} from './metadata.js'
import { nestOriginOf } from './serialize.js'
import type { CallHandlerLike, ExecutionContextLike, NestRequestLike, NestResponseLike } from './shapes.js'
import { webResponseOf } from './web-response.js'

type Settings = RouteSettings<NestRequestLike>
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type -- Nest's handlers and classes
type Target = Function

/** One marked route: its settings and what it learns while it serves. */
interface CachedRoute {
  settings: Settings
  state: RouteState
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
    const options =
      metadataOf<NestCacheRouteDecoratorOptions>(CACHE_ROUTE_METADATA, handler) ??
      metadataOf<NestCacheRouteDecoratorOptions>(CACHE_ROUTE_METADATA, context.getClass())
    const tags = metadataOf<TagSource[]>(INVALIDATE_TAGS_METADATA, handler)
    if (!options && !tags) return next.handle()
    const http = context.switchToHttp()
    const req = http.getRequest() as NestRequestLike
    const res = http.getResponse() as NestResponseLike
    const handled = next as unknown as CallHandlerLike<Observable<unknown>>
    if (!options) return this.invalidating(req, res, handler, tags!, handled) as Result
    const route = this.routeOf(context.getClass(), handler, options)
    return from(this.serve(route, req, res, handler, tags, handled)).pipe(mergeMap((answer) => answer)) as Result
  }

  private routeOf(controller: Target, handler: Target, options: NestCacheRouteDecoratorOptions): CachedRoute {
    let byHandler = this.routes.get(controller)
    if (!byHandler) this.routes.set(controller, (byHandler = new Map()))
    let route = byHandler.get(handler)
    if (!route) {
      const settings = resolveRouteOptions<NestRequestLike>({ ...this.defaults, ...options } as never)
      resolvePolicy(undefined, settings.callOptions)
      // Nest's request pipeline is over once the client is answered: no response can be
      // produced for a client answered stale, so no background refresh (docs/nestjs.md).
      route = { settings, state: { upstreamForbidsStoring: true } }
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
  ): Promise<Observable<unknown>> {
    const { settings, state } = route
    const raw = (req.raw ?? req) as IncomingMessage
    const ownHead = metadataOf<number>('method', handler) === RequestMethod.HEAD
    let verdict
    try {
      const view = { method: req.method, url: req.originalUrl ?? req.url, headers: raw.headers, scheme: req.protocol }
      verdict = classifyRequest({ ...view, ownHeadHandler: ownHead }, req, settings)
    } catch (error) {
      report(settings, error, req)
      return this.pass(res, bypassHeaders(settings), next)
    }
    if (verdict.action === 'ignore') return next.handle()
    if (verdict.action === 'bypass') return this.pass(res, bypassHeaders(settings, verdict.reason), next)
    const key = verdict.action === 'invalidate' ? verdict.keys[0]! : verdict.key
    const upstream = HeaderMap.from(res.getHeaders()).toList()
    const platform = res.raw ? 'fastify' : 'express'
    const yielding: YieldingHandler = {
      headers: raw.headers,
      produce: async () => {
        const value = await lastValueFrom(next.handle(), { defaultValue: undefined })
        const origin = nestOriginOf(
          value,
          value instanceof Response ? value.status : routeStatus(req, handler),
          platform,
        )
        if (tags && verdict.action === 'invalidate' && invalidates(origin.status))
          await this.dropTags(tags, req, (error) => report(settings, error, req))
        const headers = HeaderMap.from(res.getHeaders())
        for (const [name, value] of origin.headers) headers.set(name, value)
        if (origin.defaultType && headerOf(headers.toList(), 'content-type') === undefined)
          headers.set('Content-Type', origin.defaultType)
        if (Buffer.isBuffer(origin.body) && headerOf(headers.toList(), 'content-length') === undefined)
          headers.set('Content-Length', String(origin.body.length))
        return { status: origin.status, headers: headers.toList(), body: origin.body }
      },
    }
    const exchange = new AnswerExchange(
      req,
      { headers: raw.headers, method: req.method },
      yielding,
      this.cache,
      settings,
      state,
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
    return this.answerWith(await exchange.answered, res, next)
  }

  private answerWith(
    answer: Answer,
    res: NestResponseLike,
    next: CallHandlerLike<Observable<unknown>>,
  ): Observable<unknown> {
    switch (answer.kind) {
      case 'plan':
        for (const name of answer.plan.remove) res.removeHeader(name)
        return from([webResponseOf(answer.plan.status, answer.plan.headers, answer.plan.body)])
      case 'stream':
        return from([webResponseOf(answer.status, answer.headers, answer.body)])
      case 'pass':
        return this.pass(res, answer.headers, next)
      case 'error':
        return throwError(() => answer.error)
    }
  }

  private pass(
    res: NestResponseLike,
    headers: HeaderList,
    next: CallHandlerLike<Observable<unknown>>,
  ): Observable<unknown> {
    const target = res.raw ?? (res as unknown as { setHeader(name: string, value: string | string[]): void })
    for (const [name, value] of headers) target.setHeader(name, value)
    return next.handle()
  }
}

/** The status Nest sends a handler's value with: `@HttpCode()`, else 201 for POST and 200 otherwise. */
function routeStatus(req: NestRequestLike, handler: Target): number {
  return metadataOf<number>('__httpCode__', handler) ?? (req.method.toUpperCase() === 'POST' ? 201 : 200)
}

function report(settings: Settings, error: unknown, req: NestRequestLike): void {
  try {
    settings.onError(error, req)
  } catch {
    // an observer that throws must not break the request
  }
}
