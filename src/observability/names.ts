/**
 * The span and attribute names stampede-guard reports, shared by the cache's and the
 * locks' instrumentation. Metric names live with their instruments (cache.ts, locks.ts).
 *
 * Names follow the OpenTelemetry naming guidelines: dot-separated, one namespace
 * (`stampede_guard.`), counters without `_total` and units in the instrument (Prometheus
 * turns `stampede_guard.cache.hits` into `stampede_guard_cache_hits_total` and
 * `…load.duration` with unit `s` into `…load_duration_seconds`). OpenTelemetry has no
 * semantic conventions for caches or locks, so only `error.type` comes from them.
 */

/** The meter's and tracer's instrumentation scope. */
export const SCOPE_NAME = 'stampede-guard'

export const ATTR = {
  /** The `name` given to `instrument()`, when several caches report through one meter. */
  cacheName: 'stampede_guard.cache.name',
  /** The `name` given to `instrumentLocks()`. */
  locksName: 'stampede_guard.locks.name',
  /** What the opt-in `keyLabel` hook made of a key (never the key itself). */
  keyLabel: 'stampede_guard.key.label',
  tier: 'stampede_guard.tier',
  staleReason: 'stampede_guard.stale.reason',
  coalescedFrom: 'stampede_guard.coalesced.from',
  tagInvalidationFrom: 'stampede_guard.tag_invalidation.from',
  loadResult: 'stampede_guard.load.result',
  loadBackground: 'stampede_guard.load.background',
  loadUncached: 'stampede_guard.load.uncached',
  waitOutcome: 'stampede_guard.wait.outcome',
  timeoutKind: 'stampede_guard.timeout.kind',
  redisOperation: 'stampede_guard.redis.operation',
  lockBackend: 'stampede_guard.lock.backend',
  lockResult: 'stampede_guard.lock.result',
  lockEnd: 'stampede_guard.lock.end',
  lockOperation: 'stampede_guard.lock.operation',
  /** OpenTelemetry semantic convention (stable): the class of error an operation ended with. */
  errorType: 'error.type',
} as const

export const SPAN = {
  load: 'stampede-guard load',
  wait: 'stampede-guard wait',
  lockAcquire: 'stampede-guard lock acquire',
  lockHold: 'stampede-guard lock hold',
  /** A span event on the caller's own span when it joined another caller's flight. */
  coalescedEvent: 'stampede-guard.coalesced',
} as const

/** What a label or error type becomes once its budget of distinct values is spent (semconv's fallback value). */
export const OTHER = '_OTHER'

/** Boundaries in seconds (OTel's advice for durations): from 1 ms to 30 s. */
export const DURATION_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30,
]
