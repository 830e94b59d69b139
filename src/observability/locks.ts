import type { Attributes, Meter, Tracer } from '@opentelemetry/api'
import { InvalidArgumentError } from '../errors.js'
import type { LockEventName, LockEvents, LockEventSource } from '../lock/events.js'
import { BoundedValues } from './bounded-values.js'
import { ATTR, DURATION_BUCKETS, OTHER, SPAN } from './names.js'
import { instrumentationOf, resolveInstrumentation, type InstrumentOptions, type Instrumentation } from './options.js'
import { ObservedInstruments, SeriesSet } from './series.js'
import { recordEndedSpan } from './spans.js'

export const LOCK_ACQUIRES = 'stampede_guard.lock.acquires'
export const LOCK_LOST = 'stampede_guard.lock.lost'
export const LOCK_BACKEND_ERRORS = 'stampede_guard.lock.backend_errors'
export const LOCK_WAIT_DURATION = 'stampede_guard.lock.wait.duration'
export const LOCK_HOLD_DURATION = 'stampede_guard.lock.hold.duration'
/** Distinct backend names reported; a lock front has one or two, but a custom backend names itself. */
const MAX_BACKENDS = 20
/** What a `backend-error` can be reported with; anything else from a custom source is `_OTHER`. */
const OPERATIONS: ReadonlySet<string> = new Set<LockEvents['backend-error']['operation']>([
  'acquire',
  'renew',
  'release',
])

/**
 * Reports a lock front's events (see {@link LockEvents}) as OpenTelemetry metrics and
 * spans: acquire wait, hold time, busy, lost, backend errors. `locks` is what
 * `createLocks()` returns (or anything with the same `on()`). Same options as `instrument()`.
 */
export function instrumentLocks(locks: LockEventSource, options: InstrumentOptions = {}): Instrumentation {
  if (locks === null || typeof locks !== 'object' || typeof locks.on !== 'function') {
    throw new InvalidArgumentError(
      'locks',
      'must have on(event, listener) for the lock events (acquired, busy, released, lost)',
    )
  }
  const resolved = resolveInstrumentation(options, 'locks', ATTR.locksName)
  const { meter, tracer, labelOf, common } = resolved
  const backends = new BoundedValues(MAX_BACKENDS)
  // One variant per (outcome, backend) pair: `outcome\0backend`.
  const variant = (outcome: string, backend: unknown) => `${outcome}\u0000${backends.admit(String(backend))}`
  const split =
    (outcomeAttribute: string | undefined) =>
    (id: string): Attributes => {
      const [outcome = '', backend = ''] = id.split('\u0000')
      return outcomeAttribute
        ? { [outcomeAttribute]: outcome, [ATTR.lockBackend]: backend }
        : { [ATTR.lockBackend]: backend }
    }
  const detach: (() => void)[] = []
  const on = <E extends LockEventName>(event: E, listener: (payload: LockEvents[E]) => void) => {
    const off = locks.on(event, listener)
    if (typeof off === 'function') detach.push(off)
  }
  if (meter) meterLocks(meter, common, on, variant, split, labelOf, detach)
  if (tracer) traceLocks(tracer, common, on, labelOf)
  return instrumentationOf(detach, resolved.release)
}

type Subscribe = <E extends LockEventName>(event: E, listener: (payload: LockEvents[E]) => void) => void

function meterLocks(
  meter: Meter,
  common: Attributes,
  on: Subscribe,
  variant: (outcome: string, backend: unknown) => string,
  split: (outcomeAttribute: string | undefined) => (id: string) => Attributes,
  labelOf: ((key: string) => string) | undefined,
  detach: (() => void)[],
): void {
  const instruments = new ObservedInstruments(meter, common)
  const acquires = instruments.counter(
    LOCK_ACQUIRES,
    {
      unit: '{acquire}',
      description: 'Lock acquisitions, by result: acquired, or busy (still held elsewhere when the wait ran out)',
    },
    split(ATTR.lockResult),
  )
  const lost = instruments.counter(
    LOCK_LOST,
    { unit: '{lock}', description: 'Held locks lost before their release' },
    split(undefined),
  )
  const errors = instruments.counter(
    LOCK_BACKEND_ERRORS,
    { unit: '{error}', description: 'Lock backend failures, by operation: acquire, renew, release' },
    split(ATTR.lockOperation),
  )
  const advice = { explicitBucketBoundaries: DURATION_BUCKETS }
  const waitDuration = meter.createHistogram(LOCK_WAIT_DURATION, {
    unit: 's',
    description: 'How long an acquire waited, by result',
    advice,
  })
  const holdDuration = meter.createHistogram(LOCK_HOLD_DURATION, {
    unit: 's',
    description: 'How long a lock was held, by how it ended: released or lost',
    advice,
  })
  const holds = new SeriesSet(common, split(ATTR.lockEnd))

  const acquireEnded =
    (result: 'acquired' | 'busy') =>
    ({ key, backend, waitedMs }: LockEvents['acquired']) => {
      const series = acquires.get(variant(result, backend), labelOf?.(key))
      series.count++
      waitDuration.record(waitedMs / 1000, series.attributes)
    }
  on('acquired', acquireEnded('acquired'))
  on('busy', acquireEnded('busy'))
  on('released', ({ key, backend, heldMs }) =>
    holdDuration.record(heldMs / 1000, holds.get(variant('released', backend), labelOf?.(key)).attributes),
  )
  on('lost', ({ key, backend, heldMs }) => {
    const id = variant('lost', backend)
    lost.get(id, labelOf?.(key)).count++
    holdDuration.record(heldMs / 1000, holds.get(id, labelOf?.(key)).attributes)
  })
  on(
    'backend-error',
    ({ key, backend, operation }) =>
      errors.get(variant(OPERATIONS.has(operation) ? operation : OTHER, backend), labelOf?.(key)).count++,
  )
  detach.push(instruments.start())
}

function traceLocks(
  tracer: Tracer,
  common: Attributes,
  on: Subscribe,
  labelOf: ((key: string) => string) | undefined,
): void {
  const attributesOf = (key: string, backend: string, extra: Attributes): Attributes => {
    const attributes: Attributes = { ...common, [ATTR.lockBackend]: backend, ...extra }
    if (labelOf) attributes[ATTR.keyLabel] = labelOf(key)
    return attributes
  }
  on('acquired', ({ key, backend, waitedMs }) =>
    recordEndedSpan(tracer, SPAN.lockAcquire, waitedMs, attributesOf(key, backend, { [ATTR.lockResult]: 'acquired' })),
  )
  on('busy', ({ key, backend, waitedMs }) =>
    recordEndedSpan(
      tracer,
      SPAN.lockAcquire,
      waitedMs,
      attributesOf(key, backend, { [ATTR.lockResult]: 'busy' }),
      'busy',
    ),
  )
  on('released', ({ key, backend, heldMs }) =>
    recordEndedSpan(tracer, SPAN.lockHold, heldMs, attributesOf(key, backend, { [ATTR.lockEnd]: 'released' })),
  )
  on('lost', ({ key, backend, heldMs }) =>
    recordEndedSpan(tracer, SPAN.lockHold, heldMs, attributesOf(key, backend, { [ATTR.lockEnd]: 'lost' }), 'lost'),
  )
}
