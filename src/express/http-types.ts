import type { IncomingMessage, ServerResponse } from 'node:http'

/**
 * Express's request and response as the middleware's types name them: by shape (Node's
 * own classes plus the few fields Express adds), so this package's `.d.ts` never import
 * `express` and compile without `@types/express`. An Express 4 or 5 `Request` is a
 * `RequestLike`, and `cacheRoute()` fits wherever Express takes a handler. Your callbacks
 * (`key`, `bypass`, `tags`, `onError`) receive the Express request itself; to use fields
 * of your own (`req.user`), cast it: `(req) => (req as express.Request).user.id`.
 */
export interface RequestLike extends IncomingMessage {
  method: string
  url: string
  /** The URL as it reached the app, before mounting or rewriting. */
  originalUrl: string
  /** The path the router was mounted on. */
  baseUrl: string
  /** Route parameters (`/products/:id` → `params.id`; Express 5 gives an array for a wildcard). */
  params: Record<string, string | string[]>
  query: Record<string, unknown>
  protocol: string
  hostname: string
  body?: unknown
}

/** An Express response is a `ResponseLike`; the middleware uses only Node's `ServerResponse` API on it. */
export type ResponseLike = ServerResponse

/** Express's `next`. */
export type NextFunctionLike = (error?: unknown) => void

/** What `cacheRoute()` returns: an Express middleware (it fits `app.get(path, …)` and `router.use(…)`). */
export type RequestHandlerLike = (req: RequestLike, res: ResponseLike, next: NextFunctionLike) => void
