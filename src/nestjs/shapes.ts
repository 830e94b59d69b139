import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'

/**
 * Nest's types as this entry names them: by shape, so the package's `.d.ts` never import
 * `@nestjs/common` or `rxjs` and compile without them. Nest's `ExecutionContext` is an
 * `ExecutionContextLike`, and a `CacheRouteInterceptor` is a `NestInterceptor`.
 */
export interface ExecutionContextLike {
  getType(): string
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type -- Nest's own type for handlers and classes
  getHandler(): Function
  // eslint-disable-next-line @typescript-eslint/no-unsafe-function-type -- Nest's own type for handlers and classes
  getClass(): Function
  switchToHttp(): { getRequest(): unknown; getResponse(): unknown }
}

/** Nest's `CallHandler`: `handle()` runs the route handler and returns its result as an Observable. */
export interface CallHandlerLike<Result> {
  handle(): Result
}

/**
 * The request of either platform, as the interceptor's callbacks (`key`, `bypass`, `tags`,
 * `onError`) receive it: Express's `Request` (`@nestjs/platform-express`) or Fastify's
 * `FastifyRequest` (`@nestjs/platform-fastify`). For fields of your own, cast it.
 */
export interface NestRequestLike {
  method: string
  url: string
  originalUrl?: string
  headers: IncomingHttpHeaders
  protocol: string
  /** Route parameters (`/products/:id` → `params.id`). */
  params: Record<string, string | string[] | undefined>
  /** Fastify's Node request; absent on Express, whose request is Node's. */
  raw?: IncomingMessage
}

/** The response of either platform: Express's `Response` (Node's) or Fastify's `FastifyReply` (`raw` is Node's). */
export interface NestResponseLike {
  statusCode: number
  getHeaders(): Record<string, string | number | string[] | undefined>
  removeHeader(name: string): unknown
  raw?: ServerResponse
}

/** A decorator Nest's legacy (`experimentalDecorators`) syntax takes, on a method or a class. */
export type NestDecoratorLike = <T>(
  target: object,
  key?: string | symbol,
  descriptor?: TypedPropertyDescriptor<T>,
) => void
