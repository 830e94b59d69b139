/**
 * `stampede-guard/hono`: the route cache for Hono and for any Fetch-API handler
 * (`(Request) => Response`) on Node, Bun or Deno. It imports nothing from `hono`.
 */
export { cacheRoute, type HonoCacheRouteOptions, type HonoContextLike, type HonoNext } from './middleware.js'
export { cacheFetch, type FetchCacheOptions, type FetchHandler } from './cache-fetch.js'
export { DEFAULT_STATUSES } from '../http/options.js'
export { createCaptureBudget, DEFAULT_CAPTURE_BUDGET_BYTES, type CaptureBudget } from '../http/capture-budget.js'
export type { CacheStatus } from '../http/replay.js'
