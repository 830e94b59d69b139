/**
 * The request as the engine sees it, whatever the framework: the method, the target, the
 * header fields, and the few facts only the framework knows. Adapters build one per request
 * (src/express/middleware.ts, src/fastify/plugin.ts, src/hono/middleware.ts).
 */

/** Header fields by lower-case name, as Node's `IncomingMessage.headers` holds them. */
export type HttpHeaders = Record<string, string | string[] | undefined>

export interface HttpRequest {
  /** The method as received (any case). */
  method: string
  /** The request-target as the client sent it, before mounting or rewriting: origin-form (`/p?q`) or absolute-form. */
  url: string
  /** Header fields, lower-case names. */
  headers: HttpHeaders
  /**
   * The scheme the handler sees: the connection's, or what a proxy the app trusts says
   * (`X-Forwarded-Proto`). Part of the default key; anything but http/https passes by.
   */
  scheme: string
  /**
   * Did middleware before the cache rewrite the URL the router matched (an SPA fallback to
   * `/index.html`, an `X-Original-URL` rewrite)? Such a request passes by. Default false.
   */
  rewritten?: boolean
  /** Has the route a HEAD handler of its own? Then a HEAD passes by, not served from the GET entry. Default false. */
  ownHeadHandler?: boolean
}

/** One header's value as one string (field lines joined), or undefined. */
export function headerValue(headers: HttpHeaders, name: string): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}
