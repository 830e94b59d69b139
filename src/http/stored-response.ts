import { validateHeaderName, validateHeaderValue } from 'node:http'
import { BinaryValue } from '../entry.js'
import { INVALID_REASON, type HeaderList } from './headers.js'

/**
 * What the route cache keeps in the core cache: JSON-friendly heads (through the cache's
 * codec), and bodies as raw bytes beside them (BinaryValue, src/entry.ts).
 */

/** A response exactly as the handler produced it (after the middleware below us). */
export interface ResponseSnapshot {
  status: number
  /** Only when the handler set a non-default reason phrase. */
  statusMessage?: string
  headers: HeaderList
  body: Buffer
  /** When the handler started and ended, ms since the epoch (for its age, age.ts); unknown means now. */
  requestTime?: number
  responseTime?: number
  /**
   * The handler threw an HTTP error with this 4xx status (Koa's `ctx.throw(404)`, Nest's
   * `NotFoundException`): an answer the framework's error handling renders, so there is no
   * body to store, and no failure for a stale response to cover.
   */
  thrown?: true
}

/** A stored response. `headers` are what the handler chain set, minus what must not be replayed. */
export interface StoredResponse {
  status: number
  statusMessage?: string
  headers: HeaderList
  /** Headers that upstream middleware set but the handler removed; removed again on replay. */
  removedHeaders?: string[]
  /** The exact body bytes. */
  body: Buffer
  /** When it was produced (ms since the epoch); its resident time is counted from here. */
  storedAt: number
  /** Its age when stored (`corrected_initial_age`, RFC 9111 §4.2.3), ms; absent means 0. */
  initialAgeMs?: number
  /** When it stops being fresh (ms since the epoch), for `Cache-Status: ttl=`. */
  freshUntil?: number
  /** Once stale, never served stale: only revalidated (response-policy.ts). */
  mustRevalidate?: boolean
}

/**
 * The entry at a URL key:
 * - `response`: the response itself, when nothing varies;
 * - `variants`: which request headers select a variant, and the generation id that
 *   every variant key of this URL includes. Deleting the URL key (an unsafe method,
 *   `cache.delete`) therefore orphans all its variants at once: the next variant
 *   list gets a new generation.
 * A variant key holds a `response` entry.
 */
export type RouteEntry =
  | { kind: 'response'; response: StoredResponse }
  | {
      kind: 'variants'
      generation: string
      headers: string[]
      /** The variant keys stored under this list so far (bounded by `maxVariantsPerUrl`); absent in lists written before. */
      variants?: string[]
      life: { ttl: number; staleTtl?: number; staleIfError?: number }
    }
  /** Returned with `doNotCache`, to this request only: its own handler's result is in hand. */
  | { kind: 'uncached' }

export type VariantList = Extract<RouteEntry, { kind: 'variants' }>

export const UNCACHED: RouteEntry = { kind: 'uncached' }

/** A response's head: what the cache's codec encodes; the body travels beside it as raw bytes. */
type ResponseHead = { kind: 'response'; response: Omit<StoredResponse, 'body'> }

/**
 * What the core cache holds for an entry: a response as a BinaryValue (its head through
 * the cache's codec, its body as raw bytes, never base64), anything else as it is.
 */
export function cachedForm(entry: RouteEntry): unknown {
  if (entry.kind !== 'response') return entry
  const { body, ...head } = entry.response
  const value = new BinaryValue<ResponseHead>({ kind: 'response', response: head }, body)
  entries.set(value, entry)
  return value
}

/** The entry per cached value: L1 hands out the same object on every hit, so it is rebuilt once. */
const entries = new WeakMap<BinaryValue, RouteEntry>()

/** The route entry a cached value holds; undefined for anything this module did not write (a miss, or foreign data). */
export function routeEntryOf(value: unknown): RouteEntry | undefined {
  if (value instanceof BinaryValue) {
    const known = entries.get(value)
    if (known) return known
    const head = value.head as Partial<ResponseHead> | null
    const response = head?.response
    if (head?.kind !== 'response' || !replayableHead(response)) return undefined
    const entry: RouteEntry = { kind: 'response', response: { ...response, body: value.bytes } }
    entries.set(value, entry)
    return entry
  }
  if (typeof value !== 'object' || value === null) return undefined
  const kind = (value as { kind?: unknown }).kind
  if (kind === 'variants') {
    const list = value as Partial<VariantList>
    const variants = list.variants
    if (variants !== undefined && !(Array.isArray(variants) && variants.every((key) => typeof key === 'string')))
      return undefined
    return typeof list.generation === 'string' && Array.isArray(list.headers) && typeof list.life?.ttl === 'number'
      ? (value as VariantList)
      : undefined
  }
  return kind === 'uncached' ? UNCACHED : undefined
}

/**
 * Is a head read back from Redis one the replay can send? Anything else (another writer,
 * a corrupted restore) would make Node throw mid-replay, and the client get a 502 for a
 * request its handler can answer: such an entry is treated as foreign data, a miss. So is
 * one with a `Set-Cookie`, which this module never stores.
 */
function replayableHead(response: unknown): response is Omit<StoredResponse, 'body'> {
  if (typeof response !== 'object' || response === null) return false
  const { status, statusMessage, headers, removedHeaders, storedAt, initialAgeMs } = response as Record<string, unknown>
  if (!Number.isInteger(status) || (status as number) < 100 || (status as number) > 999 || typeof storedAt !== 'number')
    return false
  if (initialAgeMs !== undefined && !(typeof initialAgeMs === 'number' && initialAgeMs >= 0)) return false
  if (statusMessage !== undefined && (typeof statusMessage !== 'string' || INVALID_REASON.test(statusMessage)))
    return false
  if (
    removedHeaders !== undefined &&
    !(Array.isArray(removedHeaders) && removedHeaders.every((name) => typeof name === 'string'))
  )
    return false
  if (!Array.isArray(headers)) return false
  try {
    for (const field of headers) {
      if (!Array.isArray(field) || field.length !== 2 || typeof field[0] !== 'string') return false
      // Never stored (storability.ts), so never replayed: one user's session must not reach another.
      if (field[0].toLowerCase() === 'set-cookie') return false
      const fieldValue: unknown = field[1]
      if (!(
        typeof fieldValue === 'string' ||
        (Array.isArray(fieldValue) && fieldValue.every((item) => typeof item === 'string'))
      ))
        return false
      validateHeaderName(field[0])
      validateHeaderValue(field[0], fieldValue as string) // Node checks arrays too
    }
  } catch {
    return false
  }
  return true
}
