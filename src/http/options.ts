import { parseDuration, type Duration } from '../duration.js'
import { InvalidArgumentError } from '../errors.js'
import type { CallOptions, PolicyOptions } from '../options.js'
import { fixedCallOptions, POLICY_OPTION_NAMES } from '../settings.js'
import { checkTags } from '../tag.js'
import { CaptureBudget, defaultCaptureBudget } from './capture-budget.js'
import { validCacheName } from './cache-status.js'
import { canonicalHeaderNames } from './key.js'

/**
 * The status codes RFC 9110 §15.1 calls heuristically cacheable (204 included), that is
 * the default of `statuses`. 206 is left out: the middleware stores whole responses only.
 */
export const DEFAULT_STATUSES: readonly number[] = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

/**
 * Options of one cached route. The resilience options (`staleIfError`, `softTimeout`,
 * `hardTimeout`, `waitTimeout`, `onWaitTimeout`, `failSafeBackoff`, `earlyRefresh`)
 * are passed to `getOrLoad` as given; unset ones follow the cache's own settings.
 * `negativeTtl` is refused: a route never stores a failure.
 */
export interface RouteCacheOptions<Req> extends Omit<PolicyOptions, 'ttl' | 'staleTtl' | 'negativeTtl'> {
  /**
   * How long a stored response is fresh at most. Milliseconds or a string like `'10s'`.
   * Required. A response's shorter `s-maxage`/`max-age`/`Expires` shortens it; with
   * `honorCacheControl`, a longer one lengthens it.
   */
  ttl: Duration
  /**
   * stale-while-revalidate window after `ttl`: a stale response is served at once while
   * one request, in one process, refreshes it in the background. Default `0` (off).
   */
  staleTtl?: Duration
  /**
   * The cache key of a request, instead of Host + path + query. It must separate every
   * pair of requests that can get different responses (with `allowAuthenticated`, it
   * must include the user's identity). Unsafe methods invalidate `key(req)` of their
   * own request, so return the same key for the POST as for the GET of a resource.
   */
  key?: (req: Req) => string
  /** Status codes that may be stored. Default {@link DEFAULT_STATUSES}. 5xx other than 501 are refused. */
  statuses?: readonly number[]
  /**
   * Request headers that always select a variant, in addition to the response's own
   * `Vary`, e.g. `['accept-language']` for a handler that reads it without saying so.
   * Default `[]`.
   */
  varyOn?: readonly string[]
  /**
   * Store and serve responses to requests that carry `Authorization` or `Cookie`.
   * Default `false`: such requests pass by uncached (a response that says `public`,
   * `s-maxage` or `must-revalidate` to an `Authorization` request is still stored for
   * everyone, RFC 9111 §3.5). When `true`, every variant is keyed on a hash of the
   * request's `Authorization` and `Cookie` values, unless `key` is given, which then
   * must include the identity. `private` and `Set-Cookie` responses are never stored.
   */
  allowAuthenticated?: boolean
  /**
   * Let the response's own freshness lifetime (`s-maxage` > `max-age` > `Expires − Date`)
   * lengthen the route's `ttl`, up to `maxTtl`, and take its `stale-while-revalidate` /
   * `stale-if-error` windows. Default `false`: the route's `ttl` is an upper bound that
   * the response's lifetime can only shorten. Either way a response already stale
   * (`max-age=0`, a past `Expires`) is not stored.
   */
  honorCacheControl?: boolean
  /** Upper bound on a lifetime taken from the response with `honorCacheControl`. Default `'1d'`. */
  maxTtl?: Duration
  /**
   * - `'keep'` (default): replay the handler's `ETag` and `Last-Modified` as they are;
   * - `'strong'`: give a stored response without a strong `ETag` one computed from its
   *   exact bytes (Express's default weak ETag is replaced);
   * - `false`: store no `ETag` (conditional requests then rely on `Last-Modified`).
   */
  etag?: 'keep' | 'strong' | false
  /**
   * Add `X-Cache: HIT | MISS | STALE | BYPASS`. Default `false`: the header tells an
   * attacker which inputs are keyed, so turn it on where that does not matter.
   */
  xCacheHeader?: boolean
  /**
   * Add `Cache-Status` (RFC 9211) naming this cache, e.g. `cacheStatus: 'stampede-guard'`:
   * `hit` (with `ttl=`), or `fwd=` why the request went to the handler (`uri-miss`,
   * `vary-miss`, `stale`, `request`, `method`, `bypass`), `stored`, `collapsed`, and
   * `detail=` the real reason for a pass (`no-store`, `cookie`, `expired`, ...). Default
   * off, for the same reason as `xCacheHeader`; the two can be used together.
   */
  cacheStatus?: string
  /**
   * A targeted cache-control field of this cache (RFC 9213), e.g. `'Surrogate-Control'`:
   * when a response carries it (and it parses), it is used instead of `CDN-Cache-Control`,
   * `Cache-Control` and `Expires`, and it is removed before the response goes out (it
   * is for this cache only). `CDN-Cache-Control` is always honoured, below it, and sent
   * on (it is meant for every CDN downstream too). Default none.
   */
  targetedCacheControl?: string
  /**
   * Most variants stored under one URL (`Vary`, `varyOn`). A request for a new variant
   * past it passes by uncached (`detail=variant-limit`), so `Vary: User-Agent` cannot grow
   * the keys of one URL without bound, and nothing is evicted. Default 32.
   */
  maxVariantsPerUrl?: number
  /**
   * How long a response that must be revalidated before reuse (`no-cache`,
   * `must-revalidate`, `proxy-revalidate`, `s-maxage`, or already stale such as
   * `max-age=0`) is kept once stale, when it has an `ETag` or `Last-Modified`: the next
   * request runs the handler with `If-None-Match`/`If-Modified-Since`, and a 304 renews
   * it. It is never served stale. Default `'5m'`; `0` stores no such response.
   */
  revalidateTtl?: Duration
  /** Largest body that is stored, in bytes. A larger response streams to its client uncached. Default 1 MiB. */
  maxBodyBytes?: number
  /**
   * Bound on the bytes all captures sharing it buffer at once (`createCaptureBudget(bytes)`;
   * give one budget to several routes to share it). A capture whose next chunk does not
   * fit is released: its client gets what was buffered and the rest streams through,
   * uncached. Default: one 64 MiB budget shared by every route of the process not given one.
   */
  captureBudget?: CaptureBudget
  /**
   * Hit-for-miss: after a response that may not be stored by its nature (private,
   * Set-Cookie, no-store, Vary: *, too large, streamed), requests for the same key run
   * their own handler at once for this long, without queueing behind a leader. Not after
   * a status outside `statuses` (a client can have itself refused: 403, 429, a redirect to
   * log in), nor after a failure (5xx, a throw, a broken response): requests keep queueing
   * behind one leader. Default `'5s'`; `0` turns it off.
   */
  hitForMiss?: Duration
  /**
   * How long the handler may take before the middleware stops waiting to store its
   * response: whatever the handler sends afterwards streams to its own client uncached,
   * and requests waiting on it run their own handler. The client is never cut off.
   * Default `'10s'` (the core's default `waitTimeout`).
   */
  handlerTimeout?: Duration
  /** Only these `Host` values (lower case, with port if not default) are cached; others pass by. Default: any valid host. */
  allowedHosts?: readonly string[]
  /**
   * Opt-in bypass: when it returns true, the request skips the cache and runs the
   * handler, uncached. Request `Cache-Control: no-cache` is ignored by default (RFC 9111
   * §5.2.1 allows it), so anonymous clients cannot force origin work.
   */
  bypass?: (req: Req) => boolean
  /**
   * Tags of every response this route stores (see docs/tags.md), or a function of the
   * request returning them, e.g. `(req) => ['products', `product:${req.params.id}`]`. A
   * write handler then calls `cache.deleteByTag('product:1')` and every stored response
   * carrying the tag is dropped, in every process. A function that throws or returns bad
   * tags fails the request open (its handler runs, uncached; `onError` is told). Default none.
   */
  tags?: readonly string[] | ((req: Req) => readonly string[])
  /** Told about every error the middleware swallows to fail open (Redis down, a key function that threw, ...). */
  onError?: (error: unknown, req: Req) => void
}

/** The options with defaults applied and durations in ms. */
export interface RouteSettings<Req = unknown> {
  ttl: number
  staleTtl: number | undefined
  callOptions: PolicyOptions
  key: ((req: Req) => string) | undefined
  statuses: ReadonlySet<number>
  varyOn: readonly string[]
  allowAuthenticated: boolean
  honorCacheControl: boolean
  maxTtl: number
  etag: 'keep' | 'strong' | false
  xCacheHeader: boolean
  cacheStatus: string | undefined
  /** Targeted fields in precedence order (lower case): the route's own, then `cdn-cache-control`. */
  targetedFields: readonly string[]
  maxVariantsPerUrl: number
  revalidateTtl: number
  maxBodyBytes: number
  captureBudget: CaptureBudget
  hitForMiss: number
  handlerTimeout: number
  allowedHosts: ReadonlySet<string> | undefined
  bypass: ((req: Req) => boolean) | undefined
  onError: (error: unknown, req: Req) => void
  /** The tags of a request's stored responses; undefined for none. */
  tags: ((req: Req) => readonly string[]) | undefined
  /** Headers every variant of this route is keyed on: `varyOn`, plus credentials when `allowAuthenticated` has no `key`. */
  fixedVariantHeaders: readonly string[]
}

const KNOWN = new Set([
  ...POLICY_OPTION_NAMES,
  'key',
  'statuses',
  'varyOn',
  'allowAuthenticated',
  'honorCacheControl',
  'maxTtl',
  'etag',
  'xCacheHeader',
  'cacheStatus',
  'targetedCacheControl',
  'maxVariantsPerUrl',
  'revalidateTtl',
  'maxBodyBytes',
  'captureBudget',
  'hitForMiss',
  'handlerTimeout',
  'allowedHosts',
  'bypass',
  'onError',
  'tags',
])

/** `tags` as a function of the request, its result checked (InvalidArgumentError naming `cacheRoute.tags`). */
function resolveTags<Req>(tags: RouteCacheOptions<Req>['tags']): RouteSettings<Req>['tags'] {
  if (tags === undefined) return undefined
  if (typeof tags === 'function') return (req) => checkTags(tags(req), 'cacheRoute.tags')
  const fixed = checkTags(tags, 'cacheRoute.tags')
  return () => fixed
}

/** The options of one request's `getOrLoad` and `set` calls: the route's, plus the request's tags. */
export function requestCallOptions<Req>(settings: RouteSettings<Req>, req: Req): CallOptions {
  return settings.tags ? { ...settings.callOptions, tags: settings.tags(req) } : settings.callOptions
}

function checkedCacheName(name: unknown): string | undefined {
  if (name === undefined) return undefined
  if (!validCacheName(name))
    throw new InvalidArgumentError('cacheRoute.cacheStatus', 'must be a cache name of 1-64 printable ASCII characters')
  return name
}

function checkedFieldName(name: unknown): string {
  if (typeof name !== 'string' || !/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name))
    throw new InvalidArgumentError(
      'cacheRoute.targetedCacheControl',
      `must be a header field name, got ${String(name)}`,
    )
  const lower = name.toLowerCase()
  if (lower === 'cache-control' || lower === 'cdn-cache-control')
    throw new InvalidArgumentError('cacheRoute.targetedCacheControl', `names a field honoured already: ${name}`)
  return lower
}

function checkedCount(argument: string, value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) < 1)
    throw new InvalidArgumentError(argument, `must be a positive integer, got ${String(value)}`)
  return value as number
}

/** The checks that need no value resolved: an object, known names, `ttl` given, the right kinds. */
function checkOptionShape<Req>(options: RouteCacheOptions<Req>): void {
  if (typeof options !== 'object' || options === null)
    throw new InvalidArgumentError('cacheRoute', 'needs an options object with at least { ttl }')
  for (const name of Object.keys(options)) {
    if (!KNOWN.has(name)) throw new InvalidArgumentError(`cacheRoute.${name}`, 'unknown option')
  }
  if (options.ttl === undefined) throw new InvalidArgumentError('cacheRoute.ttl', 'is required')
  if (options.captureBudget !== undefined && !(options.captureBudget instanceof CaptureBudget)) {
    throw new InvalidArgumentError('cacheRoute.captureBudget', 'must come from createCaptureBudget(bytes)')
  }
  // A failed handler is never stored (no waiter may get a stored error): the route's
  // calls never cache failures, whatever the cache's own negativeTtl says.
  if ((options as { negativeTtl?: unknown }).negativeTtl !== undefined)
    throw new InvalidArgumentError(
      'cacheRoute.negativeTtl',
      'a route never stores a failed response; the handler runs again instead',
    )
  for (const name of ['key', 'bypass', 'onError'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function')
      throw new InvalidArgumentError(`cacheRoute.${name}`, 'must be a function')
  }
}

function checkedStatuses(statuses: readonly number[]): readonly number[] {
  for (const status of statuses) {
    // 501 is in RFC 9110's heuristically cacheable set (a method the resource will not
    // implement); every other 5xx is a failure of the moment and is never stored.
    if (!Number.isInteger(status) || status < 100 || status > 599 || (status >= 500 && status !== 501)) {
      throw new InvalidArgumentError(
        'cacheRoute.statuses',
        `${status} cannot be cached (1xx-4xx and 501 only; other 5xx are never stored)`,
      )
    }
  }
  return statuses
}

/** Validates route options at `cacheRoute()` time; errors name the option. */
export function resolveRouteOptions<Req>(options: RouteCacheOptions<Req>): RouteSettings<Req> {
  checkOptionShape(options)
  const ttl = parseDuration('cacheRoute.ttl', options.ttl)
  const staleTtl =
    options.staleTtl === undefined ? undefined : parseDuration('cacheRoute.staleTtl', options.staleTtl, true)
  const statuses = checkedStatuses(options.statuses ?? DEFAULT_STATUSES)
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 0)
    throw new InvalidArgumentError('cacheRoute.maxBodyBytes', `must be a non-negative integer, got ${maxBodyBytes}`)
  const etag = options.etag ?? 'keep'
  if (etag !== 'keep' && etag !== 'strong' && etag !== false)
    throw new InvalidArgumentError('cacheRoute.etag', `must be 'keep', 'strong' or false, got ${JSON.stringify(etag)}`)

  const varyOn = canonicalHeaderNames(options.varyOn ?? [])
  const allowAuthenticated = options.allowAuthenticated ?? false
  const keysOnCredentials = allowAuthenticated && options.key === undefined

  const {
    ttl: _ttl,
    staleTtl: _staleTtl,
    key,
    statuses: _s,
    varyOn: _v,
    allowAuthenticated: _a,
    honorCacheControl,
    maxTtl,
    etag: _e,
    xCacheHeader,
    cacheStatus,
    targetedCacheControl,
    maxVariantsPerUrl,
    revalidateTtl,
    maxBodyBytes: _m,
    captureBudget,
    hitForMiss,
    handlerTimeout,
    allowedHosts,
    bypass,
    onError,
    tags,
    ...resilience
  } = options
  return {
    ttl,
    staleTtl,
    callOptions: fixedCallOptions({
      ...resilience,
      ttl,
      ...(staleTtl === undefined ? {} : { staleTtl }),
      negativeTtl: 0,
    }),
    key,
    statuses: new Set(statuses),
    varyOn,
    allowAuthenticated,
    honorCacheControl: honorCacheControl ?? false,
    maxTtl: parseDuration('cacheRoute.maxTtl', maxTtl ?? '1d'),
    etag,
    xCacheHeader: xCacheHeader ?? false,
    cacheStatus: checkedCacheName(cacheStatus),
    targetedFields: [
      ...(targetedCacheControl === undefined ? [] : [checkedFieldName(targetedCacheControl)]),
      'cdn-cache-control',
    ],
    maxVariantsPerUrl: checkedCount('cacheRoute.maxVariantsPerUrl', maxVariantsPerUrl ?? 32),
    revalidateTtl: parseDuration('cacheRoute.revalidateTtl', revalidateTtl ?? '5m', true),
    maxBodyBytes,
    captureBudget: captureBudget ?? defaultCaptureBudget,
    hitForMiss: parseDuration('cacheRoute.hitForMiss', hitForMiss ?? '5s', true),
    handlerTimeout: parseDuration('cacheRoute.handlerTimeout', handlerTimeout ?? '10s'),
    allowedHosts: allowedHosts ? new Set(allowedHosts.map((host) => host.toLowerCase())) : undefined,
    bypass,
    onError: onError ?? (() => {}),
    tags: resolveTags(tags),
    fixedVariantHeaders: canonicalHeaderNames([...varyOn, ...(keysOnCredentials ? ['authorization', 'cookie'] : [])]),
  }
}
