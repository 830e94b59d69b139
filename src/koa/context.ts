import type { IncomingMessage, ServerResponse } from 'node:http'

/**
 * Koa's context as this entry's types name it: by shape (Koa's own `ctx` fields that the
 * middleware uses), so the package's `.d.ts` never import `koa` and compile without
 * `@types/koa`. A Koa 2 or 3 context is a `KoaContextLike`, and `cacheRoute()` fits
 * wherever Koa takes a middleware. Your callbacks (`key`, `bypass`, `tags`, `onError`)
 * receive the context itself; for fields of your own (`ctx.state.user`), cast it.
 */
export interface KoaContextLike {
  req: IncomingMessage
  res: ServerResponse
  /** The method; setting it sets `req.method`. */
  method: string
  /** The URL the router matches (rewritten by `koa-mount` and by rewrite middleware). */
  url: string
  /** The request-target as it reached the app. */
  originalUrl: string
  /** `http` or `https` (`X-Forwarded-Proto` when `app.proxy` is set). */
  protocol: string
  /** The status; setting it makes it explicit. */
  status: number
  /** The reason phrase. */
  message: string
  /** The body: a string, a Buffer, a stream, an object (JSON), a Blob, a web ReadableStream or Response, or null. */
  body: unknown
  /** Sets a response field (Koa's `ctx.set(name, value)`). */
  set(field: string, value: string | string[]): void
  /** Removes a response field. */
  remove(field: string): void
  /** False once the response cannot be written any more. */
  readonly writable: boolean
  /** Where `koa-mount` mounted the app this context runs in, if it did. */
  mountPath?: string
}

/** Koa's `next`. */
export type KoaNextLike = () => Promise<unknown>

/** What `cacheRoute()` returns: a Koa middleware (it fits `app.use(…)` and a router's `.all(…)`). */
export type KoaMiddlewareLike = (ctx: KoaContextLike, next: KoaNextLike) => Promise<void>
