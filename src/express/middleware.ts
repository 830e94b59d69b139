import type {
  NextFunctionLike as NextFunction,
  RequestLike as Request,
  RequestHandlerLike as RequestHandler,
  ResponseLike as Response,
} from './http-types.js'
import type { Cache } from '../cache/cache.js'
import { resolvePolicy } from '../settings.js'
import { Exchange, passThrough, reportError } from './exchange.js'
import type { RouteState } from '../http/exchange.js'
import { serveAuthorized, serveCached, serveUnsafe } from '../http/flows.js'
import { resolveRouteOptions, type RouteCacheOptions } from '../http/options.js'
import type { HttpRequest } from '../http/request.js'
import { classifyRequest } from '../http/storability.js'
import { isRewritten, requestScheme, routeHandlesHead } from './routing.js'

/** Options of one cached Express route (see RouteCacheOptions; callbacks receive Express's request). */
export type CacheRouteOptions = RouteCacheOptions<Request>

/**
 * Express middleware that caches the responses of the route it is mounted on, in
 * `cache`, shared by every process using the same Redis:
 *
 * ```ts
 * app.get('/products/:id', cacheRoute(cache, { ttl: '10s', staleTtl: '1m' }), handler)
 * ```
 *
 * On a miss exactly one request runs the handler; the others wait for its stored
 * response or get a stale one. See docs/express.md for every rule and option.
 * Options are validated here, at startup; errors name the option.
 */
export function cacheRoute(cache: Cache, options: CacheRouteOptions): RequestHandler {
  const settings = resolveRouteOptions(options)
  resolvePolicy(undefined, settings.callOptions) // fail fast on a bad resilience option, too
  const route: RouteState = { upstreamForbidsStoring: false }

  return function cacheRouteMiddleware(req: Request, res: Response, next: NextFunction): void {
    let exchange: Exchange | undefined
    const failOpen = (error: unknown) => {
      reportError(settings, error, req)
      if (exchange) void exchange.failOpen()
      else next()
    }
    try {
      const verdict = classifyRequest(requestView(req), req, settings)
      switch (verdict.action) {
        case 'ignore':
          return next()
        case 'cache':
          exchange = new Exchange(req, res, next, cache, settings, route, verdict.key)
          serveCached(exchange).catch(failOpen)
          return
        case 'invalidate':
          exchange = new Exchange(req, res, next, cache, settings, route, verdict.keys[0]!)
          serveUnsafe(exchange, verdict).catch(failOpen)
          return
        case 'bypass':
          return passThrough(res, next, settings, verdict.reason)
        case 'authorized':
          exchange = new Exchange(req, res, next, cache, settings, route, verdict.key)
          serveAuthorized(exchange).catch(failOpen)
          return
      }
    } catch (error) {
      failOpen(error)
    }
  }
}

/** The request as the engine sees it, with what only Express knows (mounting, rewrites, its own HEAD routes). */
function requestView(req: Request): HttpRequest {
  return {
    method: req.method,
    url: req.originalUrl,
    headers: req.headers,
    scheme: requestScheme(req),
    rewritten: isRewritten(req),
    ownHeadHandler: routeHandlesHead(req),
  }
}
