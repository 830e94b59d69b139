/**
 * `stampede-guard/fastify`: the route cache as a Fastify plugin. Fastify is an optional
 * peer dependency; only this entry point uses it (for types only).
 */
export { fastifyCache, type FastifyCacheRouteOptions, type FastifyCachePluginOptions } from './plugin.js'
export { DEFAULT_STATUSES } from '../http/options.js'
export { createCaptureBudget, DEFAULT_CAPTURE_BUDGET_BYTES, type CaptureBudget } from '../http/capture-budget.js'
export type { CacheStatus } from '../http/replay.js'
