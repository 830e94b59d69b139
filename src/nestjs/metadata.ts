import { SetMetadata } from '@nestjs/common'
import { resolveRouteOptions, type RouteCacheOptions } from '../http/options.js'
import type { NestDecoratorLike, NestRequestLike } from './shapes.js'

/** Options of one cached Nest route (see docs/express.md#options; callbacks receive the platform's request). */
export type NestCacheRouteOptions = RouteCacheOptions<NestRequestLike>

/** @CacheRoute's options: `ttl` may be left to the interceptor's defaults. */
export type NestCacheRouteDecoratorOptions = Omit<NestCacheRouteOptions, 'ttl'> &
  Partial<Pick<NestCacheRouteOptions, 'ttl'>>

// Resolved route options (src/http/options.ts) under this key; set by @CacheRoute.
export const CACHE_ROUTE_METADATA = 'stampede-guard:cache-route'
// The tags to drop after a successful answer; set by @InvalidateTags.
export const INVALIDATE_TAGS_METADATA = 'stampede-guard:invalidate-tags'

/** A tag list, or a function of the request giving one. */
export type TagSource = string | ((req: NestRequestLike) => string | readonly string[])

/**
 * Drops `tags` in every process (`cache.deleteByTag`, docs/tags.md) after the handler
 * answers 2xx or 3xx, before its client gets the answer, so the client's next read
 * cannot be served what it just changed. Each tag is a string or `(req) => tags`.
 * Needs a `CacheRouteInterceptor` on the route (global or `@UseInterceptors`).
 */
export function InvalidateTags(...tags: TagSource[]): NestDecoratorLike {
  if (tags.length === 0) throw new TypeError('@InvalidateTags: give at least one tag or tag function')
  for (const tag of tags)
    if (typeof tag !== 'function' && (typeof tag !== 'string' || tag.length === 0))
      throw new TypeError(`@InvalidateTags: a tag must be a non-empty string or a function, got ${String(tag)}`)
  return SetMetadata(INVALIDATE_TAGS_METADATA, tags) as NestDecoratorLike
}

/** Route options as @CacheRoute took them (checked), over the interceptor's defaults when used. */
export function CacheRoute(options: NestCacheRouteDecoratorOptions): NestDecoratorLike {
  // Checked now, at startup; `ttl` may come from the interceptor's defaults instead.
  resolveRouteOptions({ ttl: 1, ...options })
  return SetMetadata(CACHE_ROUTE_METADATA, { ...options }) as NestDecoratorLike
}

/** What Reflect metadata (reflect-metadata, loaded by every Nest app) holds for `key` on `target`. */
export function metadataOf<T>(key: string, target: object): T | undefined {
  const reflect = Reflect as unknown as { getMetadata?: (key: string, target: object) => unknown }
  return reflect.getMetadata?.(key, target) as T | undefined
}
