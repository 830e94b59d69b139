import type { Cache } from '../cache/cache.js'
import type { RouteCacheOptions } from '../http/options.js'
import { HttpCacheRoute } from '../http/route.js'
import { headerList, originRequestOf, originResponseOf, requestView, responseOf } from './fetch.js'

/**
 * Hono's `Context` as this middleware uses it, by shape: the package's `.d.ts` never
 * import `hono`. A Hono `Context` is a `HonoContextLike`.
 */
export interface HonoContextLike {
  req: { raw: Request }
  res: Response | undefined
  finalized: boolean
}

/** Hono's `next`. */
export type HonoNext = () => Promise<void>

/** Options of one cached Hono route; callbacks (`key`, `bypass`, `tags`, `onError`) receive the Hono context. */
export type HonoCacheRouteOptions<C extends HonoContextLike = HonoContextLike> = RouteCacheOptions<C>

/**
 * Hono middleware that caches the responses of the routes it runs before, in `cache`,
 * shared by every process (and every adapter) on the same Redis:
 *
 * ```ts
 * app.get('/products/:id', cacheRoute(cache, { ttl: '10s' }), (c) => c.json(product))
 * ```
 *
 * Mount it for every method of a route (`app.on(['GET', 'POST', ...])` or `app.use`), so a
 * successful POST/PUT/PATCH/DELETE invalidates the URL. See docs/hono.md.
 */
export function cacheRoute<C extends HonoContextLike = HonoContextLike>(
  cache: Cache,
  options: HonoCacheRouteOptions<C>,
): (c: C, next: HonoNext) => Promise<void> {
  const route = new HttpCacheRoute<C>(cache, options)
  return async function cacheRouteMiddleware(c: C, next: HonoNext): Promise<void> {
    const request = c.req.raw
    // Fields set by middleware before us (c.header()): per request, never stored.
    const upstream = c.finalized || c.res === undefined ? [] : headerList(c.res.headers)
    let ranOnce = false
    const answer = await route.serve(
      c,
      requestView(request),
      async (originRequest) => {
        c.req.raw = originRequestOf(request, originRequest)
        // A background run (the client was answered from the cache): the chain runs on, detached.
        if (ranOnce || c.finalized) {
          c.res = undefined
          c.finalized = false
        }
        ranOnce = true
        try {
          await next()
        } finally {
          c.req.raw = request
        }
        return originResponseOf(c.res ?? new Response(null, { status: 404 }))
      },
      upstream,
    )
    const response = responseOf(answer, upstream)
    c.res = undefined // no merge of what the handler's response carried: the answer is whole
    c.res = response
  }
}
