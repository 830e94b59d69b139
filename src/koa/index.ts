/**
 * `stampede-guard/koa`: the HTTP cache as a Koa middleware. Koa is an optional peer
 * dependency; only this entry point needs it, and its types name Koa's context by shape.
 */
export { cacheRoute, type KoaCacheRouteOptions } from './middleware.js'
export { DEFAULT_STATUSES } from '../http/options.js'
export { createCaptureBudget, DEFAULT_CAPTURE_BUDGET_BYTES, type CaptureBudget } from '../http/capture-budget.js'
export type { CacheStatus } from '../http/replay.js'
export type { KoaContextLike, KoaMiddlewareLike, KoaNextLike } from './context.js'
