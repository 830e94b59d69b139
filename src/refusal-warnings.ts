import { SerializationError, ValueTooLargeError } from './errors.js'
import { UnencodableValueError } from './tagged-json.js'

/**
 * A loaded value that cannot be stored is easy to miss: the caller gets it, and only the
 * `uncacheable` event says the cache did nothing. So the first refusal of each kind also
 * goes to `process.emitWarning` (stderr by default): once per cache and reason, never per
 * call. The kind is the codec's reason without the key or the value (for the default codec:
 * "a RegExp would become a plain object"), or "above maxValueBytes". At most
 * MAX_WARNED_REASONS per cache: a codec of your own may put the value in its message.
 */
const warned = new WeakMap<object, Set<string>>()
export const MAX_WARNED_REASONS = 20

/** The warning's `code`, for `process.on('warning')` filters. */
export const UNCACHEABLE_WARNING_CODE = 'SG_UNCACHEABLE'

export function warnUncacheableOnce(cache: object, key: string, error: unknown): void {
  const reason = reasonOf(error)
  if (reason === undefined) return
  let reasons = warned.get(cache)
  if (!reasons) warned.set(cache, (reasons = new Set()))
  if (reasons.has(reason) || reasons.size >= MAX_WARNED_REASONS) return
  reasons.add(reason)
  process.emitWarning(
    `stampede-guard: a loaded value was not cached: ${reason} (first for key ${JSON.stringify(key)}). ` +
      `Callers still get it; every such load runs the loader again. Further values refused for this reason ` +
      `are reported only through the 'uncacheable' event.`,
    { type: 'StampedeGuardWarning', code: UNCACHEABLE_WARNING_CODE },
  )
}

function reasonOf(error: unknown): string | undefined {
  if (error instanceof ValueTooLargeError) return 'it encodes to more than maxValueBytes'
  if (!(error instanceof SerializationError)) return undefined
  const cause = error.cause
  if (cause instanceof UnencodableValueError) return cause.reason
  // A codec of your own: its message is the best kind there is.
  return cause instanceof Error ? `the codec refused it (${cause.message})` : error.message
}
