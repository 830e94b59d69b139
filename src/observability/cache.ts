import { trace, type Attributes, type Meter, type Tracer } from '@opentelemetry/api'
import type { Cache } from '../cache/cache.js'
import { InvalidArgumentError } from '../errors.js'
import type { CacheEventName, CacheEvents } from '../events.js'
import { errorTyper } from './bounded-values.js'
import { LOAD_SCOPE } from '../cache/load-scope.js'
import { ATTR, DURATION_BUCKETS, SPAN } from './names.js'
import { instrumentationOf, resolveInstrumentation, type InstrumentOptions, type Instrumentation } from './options.js'
import { ObservedInstruments, SeriesSet } from './series.js'
import { recordEndedSpan, tracingLoadScope } from './spans.js'

/** One counter fed by one cache event; `variant` is the one attribute that varies, read from the event. */
interface CounterSpec<E extends CacheEventName> {
  name: string
  unit: string
  description: string
  variant?: { attribute: string; of: (payload: CacheEvents[E]) => string; known: readonly string[] }
}

type CounterSpecs = { [E in CacheEventName]?: CounterSpec<E> }

/** Every counter, by the event that feeds it. `load` and `waited` have histograms of their own below. */
export const CACHE_COUNTERS: CounterSpecs = {
  hit: {
    name: 'stampede_guard.cache.hits',
    unit: '{hit}',
    description: 'Fresh values served, by tier: l1 (this process) or redis',
    variant: { attribute: ATTR.tier, of: (e) => e.tier, known: ['l1', 'redis'] },
  },
  stale: {
    name: 'stampede_guard.cache.stale',
    unit: '{hit}',
    description: 'Stale values served, by reason',
    variant: {
      attribute: ATTR.staleReason,
      of: (e) => e.reason,
      known: ['grace', 'fail-safe', 'backoff', 'soft-timeout', 'hard-timeout', 'wait-timeout'],
    },
  },
  miss: {
    name: 'stampede_guard.cache.misses',
    unit: '{miss}',
    description: 'Lookups that found no usable value, in this process and in Redis',
  },
  coalesced: {
    name: 'stampede_guard.cache.coalesced',
    unit: '{call}',
    description:
      "Work shared instead of repeated: callers that joined this process's flight (process), flights woken by another process's commit (remote)",
    variant: { attribute: ATTR.coalescedFrom, of: (e) => e.from, known: ['process', 'remote'] },
  },
  leader: {
    name: 'stampede_guard.cache.leads',
    unit: '{lock}',
    description: 'Locks won: this process ran the loader on behalf of every process',
  },
  wait: { name: 'stampede_guard.cache.waits', unit: '{wait}', description: "Waits started for another process's load" },
  'wait-capped': {
    name: 'stampede_guard.cache.waits_capped',
    unit: '{call}',
    description:
      "Waits on another process's load past a budget: past maxWaits answered by the shared poll (no subscription), past maxPendingWaits not waited (stale or LockWaitTimeoutError)",
  },
  'fail-safe': {
    name: 'stampede_guard.cache.fail_safe',
    unit: '{load}',
    description: 'Failed loads covered by a stale value',
  },
  timeout: {
    name: 'stampede_guard.cache.timeouts',
    unit: '{timeout}',
    description: 'softTimeout, hardTimeout or waitTimeout elapsed',
    variant: { attribute: ATTR.timeoutKind, of: (e) => e.kind, known: ['soft', 'hard', 'wait'] },
  },
  uncacheable: {
    name: 'stampede_guard.cache.uncacheable',
    unit: '{load}',
    description: 'Loaded values not stored (doNotCache, undefined, not encodable)',
  },
  corrupt: {
    name: 'stampede_guard.cache.corrupt',
    unit: '{entry}',
    description: 'Foreign or malformed data found at an entry key',
  },
  fenced: {
    name: 'stampede_guard.cache.fenced',
    unit: '{commit}',
    description: 'Late commits refused because a newer value or a delete got there first',
  },
  'tag-invalidated': {
    name: 'stampede_guard.cache.tag_invalidations',
    unit: '{invalidation}',
    description:
      "Tag invalidations that reached this process's L1: its own deleteByTag (process) or another process's broadcast (remote)",
    variant: { attribute: ATTR.tagInvalidationFrom, of: (e) => e.from, known: ['process', 'remote'] },
  },
  'lock-lost': {
    name: 'stampede_guard.cache.locks_lost',
    unit: '{lock}',
    description: 'Locks lost while the loader ran',
  },
  'redis-error': {
    name: 'stampede_guard.cache.redis_errors',
    unit: '{error}',
    description: 'Redis commands that failed or timed out, by operation',
    variant: { attribute: ATTR.redisOperation, of: (e) => e.operation, known: [] },
  },
  'circuit-open': {
    name: 'stampede_guard.cache.circuit.opens',
    unit: '{transition}',
    description: 'Times the Redis circuit breaker opened',
  },
}

export const LOAD_DURATION = 'stampede_guard.cache.load.duration'
export const WAIT_DURATION = 'stampede_guard.cache.wait.duration'
export const LOADS = 'stampede_guard.cache.loads'
export const CIRCUIT_OPEN = 'stampede_guard.cache.circuit.open'

/** Caches instrumented now: a second instrumentation of one cache would double its counts. */
const instrumented = new WeakSet<Cache>()

/**
 * Reports a cache's events as OpenTelemetry metrics and spans (see docs/observability.md).
 * Only this subpath (`stampede-guard/otel`) imports `@opentelemetry/api`; a cache that is
 * never instrumented loads none of it. Call `stop()` on the result to detach.
 */
export function instrument(cache: Cache, options: InstrumentOptions = {}): Instrumentation {
  if (
    cache === null ||
    typeof cache !== 'object' ||
    typeof cache.on !== 'function' ||
    typeof cache.stats !== 'function'
  ) {
    throw new InvalidArgumentError('cache', 'must be a cache from createCache()')
  }
  if (instrumented.has(cache))
    throw new InvalidArgumentError(
      'cache',
      'is already instrumented: stop() the first instrumentation before instrumenting it again',
    )
  const resolved = resolveInstrumentation(options, 'cache', ATTR.cacheName)
  const { meter, tracer, labelOf, common } = resolved
  instrumented.add(cache)
  const errorTypeOf = errorTyper()
  const detach: (() => void)[] = []
  if (meter) detach.push(...meterCache(cache, meter, common, labelOf, errorTypeOf))
  if (tracer) detach.push(...traceCache(cache, tracer, common, labelOf, errorTypeOf))
  return instrumentationOf(detach, () => {
    resolved.release()
    instrumented.delete(cache)
  })
}

/** The key label of a keyed event, when a labeler is configured. */
const labelFor = (labelOf: ((key: string) => string) | undefined, payload: object): string | undefined =>
  labelOf && 'key' in payload ? labelOf(payload.key as string) : undefined

function meterCache(
  cache: Cache,
  meter: Meter,
  common: Attributes,
  labelOf: ((key: string) => string) | undefined,
  errorTypeOf: (error: unknown) => string,
): (() => void)[] {
  const detach: (() => void)[] = []
  const instruments = new ObservedInstruments(meter, common)

  const count = <E extends CacheEventName>(event: E, { name, unit, description, variant }: CounterSpec<E>) => {
    const series = instruments.counter(
      name,
      { unit, description },
      variant && ((value) => ({ [variant.attribute]: value })),
    )
    if (!labelOf) for (const value of variant?.known ?? ['']) series.get(value) // zeros from the start, so rate() has a series
    detach.push(
      cache.on(
        event,
        variant
          ? (payload) => series.get(variant.of(payload), labelFor(labelOf, payload)).count++
          : (payload) => series.get('', labelFor(labelOf, payload)).count++,
      ),
    )
  }
  for (const event of Object.keys(CACHE_COUNTERS) as CacheEventName[])
    count(event, CACHE_COUNTERS[event] as CounterSpec<typeof event>)

  // Loads: a counter and a histogram sharing one attribute set per result (`ok`, or the error's class).
  const loads = instruments.counter(
    LOADS,
    { unit: '{load}', description: 'Loader runs, by result (ok, or error with error.type)' },
    (result) =>
      result === 'ok' ? { [ATTR.loadResult]: 'ok' } : { [ATTR.loadResult]: 'error', [ATTR.errorType]: result },
  )
  if (!labelOf) loads.get('ok')
  const loadDuration = meter.createHistogram(LOAD_DURATION, {
    unit: 's',
    description: 'How long loaders ran',
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  })
  detach.push(
    cache.on('load', ({ key, durationMs, error }) => {
      const series = loads.get(error === undefined ? 'ok' : errorTypeOf(error), labelOf?.(key))
      series.count++
      loadDuration.record(durationMs / 1000, series.attributes)
    }),
  )

  const waits = new SeriesSet(common, (outcome) => ({ [ATTR.waitOutcome]: outcome }))
  const waitDuration = meter.createHistogram(WAIT_DURATION, {
    unit: 's',
    description: "How long a process waited for another process's load, by how the wait ended",
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  })
  detach.push(
    cache.on('waited', ({ key, durationMs, outcome }) =>
      waitDuration.record(durationMs / 1000, waits.get(outcome, labelOf?.(key)).attributes),
    ),
  )

  // Circuit state as a gauge: 1 while the breaker is open. Instrumented late, the counters say where it stands.
  const stats = cache.stats()
  let circuitOpen = stats['circuit-open'] > stats['circuit-close'] ? 1 : 0
  detach.push(
    cache.on('circuit-open', () => (circuitOpen = 1)),
    cache.on('circuit-close', () => (circuitOpen = 0)),
  )
  instruments.gauge(
    CIRCUIT_OPEN,
    { unit: '1', description: 'Whether the Redis circuit breaker is open (1) or closed (0)' },
    () => circuitOpen,
  )

  detach.push(instruments.start())
  return detach
}

function traceCache(
  cache: Cache,
  tracer: Tracer,
  common: Attributes,
  labelOf: ((key: string) => string) | undefined,
  errorTypeOf: (error: unknown) => string,
): (() => void)[] {
  const scope = tracingLoadScope(tracer, common, labelOf, errorTypeOf)
  cache[LOAD_SCOPE] = scope
  const attributesOf = (key: string, extra: Attributes): Attributes =>
    labelOf ? { ...common, ...extra, [ATTR.keyLabel]: labelOf(key) } : { ...common, ...extra }
  return [
    () => {
      if (cache[LOAD_SCOPE] === scope) cache[LOAD_SCOPE] = undefined
    },
    cache.on('waited', ({ key, durationMs, outcome }) => {
      recordEndedSpan(
        tracer,
        SPAN.wait,
        durationMs,
        attributesOf(key, { [ATTR.waitOutcome]: outcome }),
        outcome === 'error' || outcome === 'failed' ? outcome : undefined,
      )
    }),
    // On the joining caller's own span (the event is emitted in its context): why it took as long as the load.
    cache.on('coalesced', ({ key, from }) =>
      trace.getActiveSpan()?.addEvent(SPAN.coalescedEvent, attributesOf(key, { [ATTR.coalescedFrom]: from })),
    ),
  ]
}
