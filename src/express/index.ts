/**
 * `stampede-guard/express`: the route middleware. Express is an optional peer
 * dependency; only this entry point needs it.
 */
export { cacheRoute, type CacheRouteOptions } from './middleware.js'
export { DEFAULT_STATUSES } from '../http/options.js'
export { createCaptureBudget, DEFAULT_CAPTURE_BUDGET_BYTES, type CaptureBudget } from '../http/capture-budget.js'
export type { CacheStatus } from '../http/replay.js'
export type { NextFunctionLike, RequestHandlerLike, RequestLike, ResponseLike } from './http-types.js'
