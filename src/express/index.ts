/**
 * `stampede-guard/express`: the route middleware. Express is an optional peer
 * dependency; only this entry point needs it.
 */
export { cacheRoute } from './middleware.js'
export { DEFAULT_STATUSES, type CacheRouteOptions } from './options.js'
export { createCaptureBudget, DEFAULT_CAPTURE_BUDGET_BYTES, type CaptureBudget } from './capture-budget.js'
export type { CacheStatus } from './replay.js'
export type { NextFunctionLike, RequestHandlerLike, RequestLike, ResponseLike } from './http-types.js'
