import { createNoopMeter, metrics, trace, type Attributes, type Meter, type Tracer } from '@opentelemetry/api'
import { InvalidArgumentError } from '../errors.js'
import { keyLabeler } from './bounded-values.js'
import { SCOPE_NAME } from './names.js'
import type { MeterLike, TracerLike } from './otel-like.js'

/** Options of `instrument()` and `instrumentLocks()`. */
export interface InstrumentOptions {
  /**
   * Where the metrics go. Default: the meter named `stampede-guard` from the global
   * MeterProvider (`metrics.getMeter`), a no-op until an SDK registers one. `false`: no metrics.
   */
  meter?: MeterLike | false
  /**
   * Where the spans go. Default: the tracer named `stampede-guard` from the global
   * TracerProvider (`trace.getTracer`). `false`: no spans.
   */
  tracer?: TracerLike | false
  /**
   * Opt-in: maps a key to a low-cardinality label (`'user:42'` → `'user'`), reported as
   * the `stampede_guard.key.label` attribute on every keyed metric and span. Keys are
   * never attributes otherwise (cardinality, and personal data). Called on every event,
   * the L1 hit included, so keep it cheap. A label that is not a non-empty string, or a
   * hook that throws, reports `_OTHER`.
   */
  keyLabel?: (key: string) => string | undefined
  /** Budget of distinct `keyLabel` values; later ones report `_OTHER`. Default `100`. */
  maxKeyLabels?: number
  /**
   * Reported as `stampede_guard.cache.name` (or `stampede_guard.locks.name`). Needed
   * when several caches (or lock fronts) report through one meter: their counters would
   * otherwise be indistinguishable, so a second one without a distinct name is refused.
   */
  name?: string
}

export const DEFAULT_MAX_KEY_LABELS = 100

/** What `instrument()` and `instrumentLocks()` return. */
export interface Instrumentation {
  /** Detaches: no more metrics or spans from this source; its observable series disappear. Idempotent. */
  stop(): void
}

/** @internal Holds the API's own types: kept out of the published `.d.ts`. */
export interface ResolvedInstrumentation {
  meter: Meter | undefined
  tracer: Tracer | undefined
  labelOf: ((key: string) => string) | undefined
  /** Attributes on every metric and span: the name, when given. */
  common: Attributes
  /** Frees the (meter, name) pair for another instrumentation. */
  release(): void
}

/** Which (kind, name) pairs report through each meter now: a duplicate would emit clashing observable series. */
const namesInUse = new WeakMap<Meter, Set<string>>()

/** @internal */
export function resolveInstrumentation(
  options: InstrumentOptions,
  kind: 'cache' | 'locks',
  nameAttribute: string,
): ResolvedInstrumentation {
  if (options === null || typeof options !== 'object')
    throw new InvalidArgumentError('options', `must be an object, got ${options === null ? 'null' : typeof options}`)
  const { keyLabel, maxKeyLabels = DEFAULT_MAX_KEY_LABELS, name } = options
  if (keyLabel !== undefined && typeof keyLabel !== 'function')
    throw new InvalidArgumentError('keyLabel', `must be a function of the key, got ${typeof keyLabel}`)
  if (!Number.isInteger(maxKeyLabels) || maxKeyLabels < 1)
    throw new InvalidArgumentError('maxKeyLabels', `must be a positive integer, got ${String(maxKeyLabels)}`)
  if (name !== undefined && (typeof name !== 'string' || name === ''))
    throw new InvalidArgumentError('name', 'must be a non-empty string')
  let meter =
    options.meter === false ? undefined : ((options.meter as Meter | undefined) ?? metrics.getMeter(SCOPE_NAME))
  // The global no-op meter (no SDK registered) reports nothing, and never will: the metrics API has no
  // proxy that would forward to a provider registered later. Attach nothing, and so cost nothing.
  if (meter === createNoopMeter()) meter = undefined
  const tracer =
    options.tracer === false ? undefined : ((options.tracer as Tracer | undefined) ?? trace.getTracer(SCOPE_NAME))
  if (
    meter &&
    (typeof meter.createHistogram !== 'function' || typeof meter.addBatchObservableCallback !== 'function')
  ) {
    throw new InvalidArgumentError('meter', 'must be an OpenTelemetry Meter (meterProvider.getMeter(...)), or false')
  }
  if (tracer && typeof tracer.startSpan !== 'function')
    throw new InvalidArgumentError(
      'tracer',
      'must be an OpenTelemetry Tracer (tracerProvider.getTracer(...)), or false',
    )

  const slot = `${kind}\u0000${name ?? ''}`
  if (meter) {
    const inUse = namesInUse.get(meter) ?? new Set<string>()
    if (inUse.has(slot)) {
      throw new InvalidArgumentError(
        'name',
        name === undefined
          ? `another ${kind} already reports through this meter without a name: give each one a distinct name`
          : `another ${kind} already reports through this meter as "${name}": give each one a distinct name`,
      )
    }
    inUse.add(slot)
    namesInUse.set(meter, inUse)
  }
  return {
    meter,
    tracer,
    labelOf: keyLabeler(keyLabel, maxKeyLabels),
    common: name === undefined ? {} : { [nameAttribute]: name },
    release: () => {
      if (meter) namesInUse.get(meter)?.delete(slot)
    },
  }
}

/** The handle `instrument()` and `instrumentLocks()` return: `stop()` undoes every attachment once, then runs `after`. */
export function instrumentationOf(detach: readonly (() => void)[], after: () => void): Instrumentation {
  let stopped = false
  return {
    stop() {
      if (stopped) return
      stopped = true
      for (const undo of detach) undo()
      after()
    },
  }
}
