/**
 * The conformance suite's view of an adapter: a factory that serves a set of routes,
 * each behind the adapter's cache with the given options, each ending in a
 * framework-neutral handler. One file per adapter in ./apps/ implements it; the cases
 * (./cases.ts) run through each over real HTTP.
 */
import type { Cache } from '../../src/index.js'
import type { RouteCacheOptions } from '../../src/http/options.js'

/** The request as a neutral handler sees it (the framework's view, converted). */
export interface NeutralRequest {
  method: string
  url: string
  headers: Record<string, string | undefined>
  /** The host the framework says the request is for (what a handler builds its links from). */
  authority: string
}

/** A response a neutral handler produces; each app factory turns it into its framework's. */
export interface NeutralResponse {
  status?: number
  headers?: Record<string, string | string[]>
  /** Bytes, text, or chunks sent one by one (a stream that throws is a handler failing midway). */
  body?: string | Buffer | AsyncIterable<Buffer>
}

/** Throws to fail the way the framework's handlers fail (its error handler answers 500). */
export type NeutralHandler = (request: NeutralRequest) => NeutralResponse | Promise<NeutralResponse>

/** Route options every adapter accepts: the engine's, without framework-specific callbacks. */
export type NeutralOptions = Omit<RouteCacheOptions<unknown>, 'key' | 'bypass' | 'tags' | 'onError'>

export interface NeutralRoute {
  path: string
  options: NeutralOptions
  /** Methods routed to the handler behind the cache. Default: GET, HEAD, POST, PUT, PATCH, DELETE. */
  handler: NeutralHandler
}

export interface ServedApp {
  port: number
  close(): Promise<void>
}

export interface ConformanceAdapter {
  /** As in the test names: `express`, `fastify`, `hono`, ... */
  name: string
  /** Serves `routes` on 127.0.0.1 (a free port), each behind the adapter's cache in `cache`. */
  serve(cache: Cache, routes: NeutralRoute[]): Promise<ServedApp>
  /**
   * Cases (by name, see cases.ts) this adapter cannot support, each with the reason; the
   * same list is in the adapter's docs. They are reported as todo, never silently skipped.
   */
  unsupported?: Record<string, string>
}

/** Every adapter's routes run these methods through the cache. */
export const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const

/** The neutral request headers as one-string values. */
export function neutralHeaders(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {}
  for (const [name, value] of Object.entries(headers)) out[name] = Array.isArray(value) ? value.join(', ') : value
  return out
}
