/**
 * `stampede-guard/otel`: OpenTelemetry metrics and spans for a cache and a lock front.
 * The only entry point that imports `@opentelemetry/api` (an optional peer dependency):
 * the main entry and `stampede-guard/express` never load it. See docs/observability.md.
 */
export { instrument } from './cache.js'
export { instrumentLocks } from './locks.js'
export type { LockEventName, LockEvents, LockEventSource } from '../lock/events.js'
export { DEFAULT_MAX_KEY_LABELS, type InstrumentOptions, type Instrumentation } from './options.js'
