import { OTHER } from './names.js'

/**
 * The distinct values of one attribute, capped: the first `limit` distinct values pass,
 * later ones report as `_OTHER`. A hook that returns too many values (a key label that is
 * really the key, an error class per request) cannot grow the metric series, and with
 * them the exporter's memory, without bound.
 */
export class BoundedValues {
  private readonly seen = new Set<string>()

  constructor(private readonly limit: number) {}

  admit(value: string): string {
    if (this.seen.has(value)) return value
    if (this.seen.size >= this.limit) return OTHER
    this.seen.add(value)
    return value
  }
}

/** The opt-in key → label hook made safe: it never throws, and yields at most `limit` distinct labels (then `_OTHER`). */
export function keyLabeler(
  hook: ((key: string) => string | undefined) | undefined,
  limit: number,
): ((key: string) => string) | undefined {
  if (!hook) return undefined
  const labels = new BoundedValues(limit)
  return (key) => {
    let label: unknown
    try {
      label = hook(key)
    } catch {
      return OTHER // a broken hook must not cost a cache call, or its count
    }
    return typeof label === 'string' && label !== '' ? labels.admit(label) : OTHER
  }
}

/** Distinct error classes reported as `error.type` (semconv: the class name), at most this many per instrumentation. */
export const MAX_ERROR_TYPES = 20

/** `error.type` of a thrown value: its class name (`error.name`), or `_OTHER` for a non-Error, bounded like a key label. */
export function errorTyper(): (error: unknown) => string {
  const types = new BoundedValues(MAX_ERROR_TYPES)
  return (error) =>
    error instanceof Error && typeof error.name === 'string' && error.name !== '' ? types.admit(error.name) : OTHER
}
