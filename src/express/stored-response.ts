import type { HeaderList } from './headers.js'

/**
 * What the route cache keeps in the core cache. Every value is plain JSON, because
 * the default codec is JSON: body bytes travel as base64.
 */

/** A response exactly as the handler produced it (after the middleware below us). */
export interface ResponseSnapshot {
  status: number
  /** Only when the handler set a non-default reason phrase. */
  statusMessage?: string
  headers: HeaderList
  body: Buffer
}

/** A stored response. `headers` are what the handler chain set, minus what must not be replayed. */
export interface StoredResponse {
  status: number
  statusMessage?: string
  headers: HeaderList
  /** Headers that upstream middleware set but the handler removed; removed again on replay. */
  removedHeaders?: string[]
  /** The exact body bytes, base64. */
  body: string
  /** When it was produced (ms since the epoch); `Age` is counted from here. */
  storedAt: number
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
  | { kind: 'variants'; generation: string; headers: string[]; life: { ttl: number; staleTtl?: number; staleIfError?: number } }
  /** Returned with `doNotCache`, to this request only: its own handler's result is in hand. */
  | { kind: 'uncached' }

export type VariantList = Extract<RouteEntry, { kind: 'variants' }>

export const UNCACHED: RouteEntry = { kind: 'uncached' }

/** Decoded bodies, per stored object: L1 hands out the same object on every hit. */
const decodedBodies = new WeakMap<StoredResponse, Buffer>()

export function bodyOf(stored: StoredResponse): Buffer {
  let body = decodedBodies.get(stored)
  if (!body) {
    body = Buffer.from(stored.body, 'base64')
    decodedBodies.set(stored, body)
  }
  return body
}

/** Is `value` a route entry this module wrote? Anything else at our key is treated as a miss. */
export function isRouteEntry(value: unknown): value is RouteEntry {
  if (typeof value !== 'object' || value === null) return false
  const kind = (value as { kind?: unknown }).kind
  if (kind === 'response') {
    const response = (value as { response?: Partial<StoredResponse> }).response
    return typeof response?.status === 'number' && Array.isArray(response.headers) && typeof response.body === 'string' && typeof response.storedAt === 'number'
  }
  if (kind === 'variants') {
    const list = value as Partial<VariantList>
    return typeof list.generation === 'string' && Array.isArray(list.headers) && typeof list.life?.ttl === 'number'
  }
  return kind === 'uncached'
}
