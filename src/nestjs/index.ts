/**
 * `stampede-guard/nestjs`: the HTTP cache as a Nest interceptor, with `@CacheRoute` and
 * `@InvalidateTags`. `@nestjs/common` and `rxjs` are optional peer dependencies; only this
 * entry point needs them, and its types name Nest's by shape.
 */
export { CacheRouteInterceptor } from './interceptor.js'
export {
  CacheRoute,
  InvalidateTags,
  type NestCacheRouteOptions,
  type NestCacheRouteDecoratorOptions,
  type TagSource,
} from './metadata.js'
export { DEFAULT_STATUSES } from '../http/options.js'
export { createCaptureBudget, DEFAULT_CAPTURE_BUDGET_BYTES, type CaptureBudget } from '../http/capture-budget.js'
export type { CacheStatus } from '../http/replay.js'
export type {
  CallHandlerLike,
  ExecutionContextLike,
  NestDecoratorLike,
  NestRequestLike,
  NestResponseLike,
} from './shapes.js'
