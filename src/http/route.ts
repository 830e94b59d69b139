import type { Cache } from '../cache/cache.js'
import { resolvePolicy } from '../settings.js'
import type { OriginResponse } from './body-capture.js'
import { bypassHeaders, type RouteState } from './exchange.js'
import { serveAuthorized, serveCached, serveUnsafe } from './flows.js'
import type { HeaderList } from './headers.js'
import { OriginExchange, type HttpAnswer, type Origin } from './origin-exchange.js'
import { resolveRouteOptions, type RouteCacheOptions, type RouteSettings } from './options.js'
import type { HttpRequest } from './request.js'
import { classifyRequest } from './storability.js'

/**
 * One cached route for an adapter whose handler hands back a response object (Fastify,
 * Hono and any fetch handler, Koa, NestJS): the whole engine behind one call.
 *
 * ```ts
 * const route = new HttpCacheRoute(cache, { ttl: '10s' })
 * const answer = await route.serve(frameworkRequest, { method, url, headers, scheme }, (request) => runHandler(request))
 * // send answer.status, answer.headers (after removing answer.remove), answer.body
 * ```
 *
 * `serve` never rejects for a cache failure (Redis down, a bad tag): the request is
 * answered by its own handler, uncached, and `onError` is told.
 */
export class HttpCacheRoute<Req> {
  readonly settings: RouteSettings<Req>
  private readonly state: RouteState = { upstreamForbidsStoring: false }

  /** Options are validated here, at startup; errors name the option (`cacheRoute.ttl`, ...). */
  constructor(
    readonly cache: Cache,
    options: RouteCacheOptions<Req>,
  ) {
    this.settings = resolveRouteOptions(options)
    resolvePolicy(undefined, this.settings.callOptions) // fail fast on a bad resilience option, too
  }

  /**
   * Serves one request: `raw` is the framework's request (given to `key`, `bypass`, `tags`,
   * `onError`), `request` the engine's view of it, `origin` runs the route's handler (at most
   * once, possibly after the answer went out: see OriginRequest.background).
   * `upstreamHeaders`: headers already set on the response before the cache ran; they are
   * per request, so never stored.
   */
  async serve(
    raw: Req,
    request: HttpRequest,
    origin: Origin,
    upstreamHeaders: HeaderList = [],
  ): Promise<HttpAnswer & { handlerError?: unknown }> {
    const { settings } = this
    let verdict
    try {
      verdict = classifyRequest(request, raw, settings)
    } catch (error) {
      this.report(error, raw)
      verdict = { action: 'bypass' as const, reason: undefined }
    }
    if (verdict.action === 'ignore') return answerOf(await origin({ ...request, background: false }), [])
    if (verdict.action === 'bypass')
      return answerOf(await origin({ ...request, background: false }), bypassHeaders(settings, verdict.reason))
    const key = verdict.action === 'invalidate' ? verdict.keys[0]! : verdict.key
    const exchange = new OriginExchange(this.cache, settings, this.state, key, raw, request, origin, upstreamHeaders)
    const flow =
      verdict.action === 'cache'
        ? serveCached(exchange)
        : verdict.action === 'invalidate'
          ? serveUnsafe(exchange, verdict)
          : serveAuthorized(exchange)
    flow.catch((error: unknown) => {
      this.report(error, raw)
      void exchange.failOpen()
    })
    const answer = await exchange.answer
    // The handler threw and nothing covered it (a stale response would, for a 5xx): the
    // adapter rethrows it to its framework, which renders it (a thrown 404 as its 404).
    return exchange.handlerError === undefined || answer.status < 400
      ? answer
      : { ...answer, handlerError: exchange.handlerError }
  }

  private report(error: unknown, raw: Req): void {
    try {
      this.settings.onError(error, raw)
    } catch {
      // an observer that throws must not break the request
    }
  }
}

function answerOf(response: OriginResponse, extra: HeaderList): HttpAnswer {
  const answer: HttpAnswer = {
    status: response.status,
    remove: [],
    headers: [...response.headers, ...extra],
    body: response.body,
  }
  if (response.statusMessage !== undefined) answer.statusMessage = response.statusMessage
  return answer
}
