import type { IncomingMessage } from 'node:http'
import { parseTarget } from '../http/key.js'

/**
 * What only Express knows about a request's URL: how mounting split it (`baseUrl` + `url`),
 * whether something rewrote it, and the scheme Express reports.
 */

type RoutedRequest = IncomingMessage & { originalUrl?: string; baseUrl?: string }

/**
 * The scheme a handler sees: Express's `req.protocol`, which reads `X-Forwarded-Proto`
 * when `trust proxy` is on (so a client may send anything there); the connection's
 * otherwise. Part of the default key.
 */
export function requestScheme(req: IncomingMessage & { protocol?: unknown }): string {
  if (typeof req.protocol === 'string') return req.protocol
  return (req.socket as { encrypted?: boolean } | undefined)?.encrypted ? 'https' : 'http'
}

/**
 * Express's `req.baseUrl` + `req.url`: the URL the router matched (mounting moves a prefix
 * from one to the other, so their sum is what the request line said unless something
 * rewrote `req.url`). Mounted at its own root, `/api` is routed as baseUrl `/api` and url `/`.
 */
export function routedTargets(req: RoutedRequest): string[] {
  const base = req.baseUrl ?? ''
  const url = parseTarget(req.url ?? '/')?.pathAndQuery ?? req.url ?? '/'
  const routed = [base + url]
  if (base !== '' && (url === '/' || url.startsWith('/?'))) routed.push(base + url.slice(1))
  return routed
}

/**
 * Did middleware before us rewrite the URL the router matched (an `X-Original-URL`
 * rewrite, an SPA history fallback to `/index.html`)? Then what the handler produces
 * depends on whatever drove the rewrite (a request header), which the key does not see.
 */
export function isRewritten(req: RoutedRequest): boolean {
  const original = parseTarget(req.originalUrl ?? req.url ?? '/')?.pathAndQuery
  return original === undefined || !routedTargets(req).includes(original)
}

/** Do two readings of routedTargets() name the same URL (wherever mounting split it)? */
export function sameRoutedUrl(a: readonly string[], b: readonly string[]): boolean {
  return a.some((url) => b.includes(url))
}

/**
 * Did Express route this request to a route with a HEAD handler of its own (`app.head`,
 * `route().head`)? `app.all` registers the same handlers for HEAD as for GET: not its own.
 */
export function routeHandlesHead(req: IncomingMessage): boolean {
  const route = (req as { route?: { stack?: Array<{ method?: string; handle?: unknown }> } }).route
  if (!Array.isArray(route?.stack)) return false
  const handles = (method: string) => route.stack!.filter((layer) => layer.method === method).map((l) => l.handle)
  const head = handles('head')
  const get = handles('get')
  return head.length > 0 && (head.length !== get.length || head.some((handle, i) => handle !== get[i]))
}
