import type { Cache } from '../cache/cache.js'
import type { RouteCacheOptions } from '../http/options.js'
import { HttpCacheRoute } from '../http/route.js'
import { originRequestOf, originResponseOf, requestView, responseOf } from './fetch.js'

/** A Fetch-API handler: Bun.serve's, Deno.serve's, a worker's `fetch`, Hono's `app.fetch`. */
export type FetchHandler = (request: Request) => Response | Promise<Response>

/** Options of a cached fetch handler; callbacks (`key`, `bypass`, `tags`, `onError`) receive the `Request`. */
export type FetchCacheOptions = RouteCacheOptions<Request>

/**
 * Wraps a fetch handler so that its responses are cached in `cache`, shared by every
 * process on the same Redis; on a miss exactly one request runs `handler`:
 *
 * ```ts
 * Deno.serve(cacheFetch(cache, { ttl: '10s' }, (request) => new Response('hello')))
 * ```
 *
 * A `handler` that throws rejects the returned promise, as it would uncached (unless a
 * stale response covers the failure).
 */
export function cacheFetch(
  cache: Cache,
  options: FetchCacheOptions,
  handler: FetchHandler,
): (request: Request) => Promise<Response> {
  const route = new HttpCacheRoute<Request>(cache, options)
  return async function cachedFetch(request: Request): Promise<Response> {
    const answer = await route.serve(request, requestView(request), async (originRequest) =>
      originResponseOf(await handler(originRequestOf(request, originRequest))),
    )
    if (answer.handlerError !== undefined) throw answer.handlerError
    return responseOf(answer)
  }
}
