import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import type {
  FastifyInstance,
  FastifyPluginCallback,
  FastifyReply,
  FastifyRequest,
  RouteOptions,
  onSendHookHandler,
  preHandlerHookHandler,
} from 'fastify'
import type { Cache } from '../cache/cache.js'
import type { BodySource, OriginResponse } from '../http/body-capture.js'
import type { HeaderList } from '../http/headers.js'
import type { HttpAnswer, OriginRequest } from '../http/origin-exchange.js'
import type { RouteCacheOptions } from '../http/options.js'
import { HttpCacheRoute } from '../http/route.js'
import type { HttpRequest } from '../http/request.js'

/** Options of one cached Fastify route (`config: { cache: { ttl: '10s' } }`); callbacks receive the `FastifyRequest`. */
export type FastifyCacheRouteOptions = RouteCacheOptions<FastifyRequest>

export interface FastifyCachePluginOptions {
  /** The cache every cached route stores in (`createCache`). Required. */
  cache: Cache
  /** Options every cached route starts from; a route's own `config.cache` overrides them. Default none. */
  defaults?: Partial<FastifyCacheRouteOptions>
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Cache this route's responses (stampede-guard/fastify): `{ ttl: '10s', ... }`, or `true` for the plugin's defaults. */
    cache?: Partial<FastifyCacheRouteOptions> | true
  }
}

/** One request's passage through the hooks. */
interface Passage {
  /** The answer is being sent by the cache: the onSend hook lets it through. */
  answering: boolean
  /** The handler runs for the engine: onSend hands its response over (`origin`) and sends the answer. */
  origin?: (response: OriginResponse) => void
  /** What the engine answers this request with. */
  answer?: Promise<HttpAnswer>
  upstream: HeaderList
  restore?: () => void
}

const passages = new WeakMap<FastifyRequest, Passage>()

/**
 * Per-process secret of the requests this plugin injects to refresh a stale entry in the
 * background (the client was answered from the cache): they run the handler uncached.
 * Unguessable, so no client can make its own request skip the cache.
 */
const REFRESH_HEADER = 'x-stampede-guard-refresh'
const refreshSecret = randomBytes(18).toString('base64url')

/**
 * The plugin: every route registered after it with `config: { cache: { ttl } }` is cached
 * (GET and HEAD served from the cache; any other method invalidates the URL on 2xx/3xx).
 * See docs/fastify.md.
 */
const plugin: FastifyPluginCallback<FastifyCachePluginOptions> = (fastify, options, done) => {
  if (!options || typeof options.cache !== 'object' || options.cache === null)
    return done(new TypeError('stampede-guard/fastify: register with { cache }'))
  // Handlers of cached GET routes by URL: Fastify's own HEAD route of a GET reuses its handler.
  const getHandlers = new Map<string, Set<unknown>>()
  fastify.addHook('onRoute', (routeOptions) => {
    const own = routeOptions.config?.cache
    if (own === undefined) return
    const methods = [routeOptions.method].flat()
    if (methods.includes('GET')) {
      const handlers = getHandlers.get(routeOptions.url) ?? new Set()
      getHandlers.set(routeOptions.url, handlers.add(routeOptions.handler))
    }
    // A HEAD route that is not Fastify's own for a cached GET has a handler of its own: passes by.
    const ownHeadHandler =
      methods.length === 1 && methods[0] === 'HEAD' && !getHandlers.get(routeOptions.url)?.has(routeOptions.handler)
    const route = new HttpCacheRoute<FastifyRequest>(options.cache, {
      ...options.defaults,
      ...(own === true ? {} : own),
    } as FastifyCacheRouteOptions)
    addHooks(fastify, routeOptions, route, ownHeadHandler)
  })
  done()
}
Object.assign(plugin, {
  // What fastify-plugin sets: the hooks apply to the scope that registers the plugin.
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'stampede-guard',
  [Symbol.for('plugin-meta')]: { name: 'stampede-guard', fastify: '5.x' },
})

export const fastifyCache = plugin

function addHooks(
  fastify: FastifyInstance,
  routeOptions: RouteOptions,
  route: HttpCacheRoute<FastifyRequest>,
  ownHeadHandler: boolean,
): void {
  const lookup: preHandlerHookHandler = async function cacheLookup(request, reply) {
    if (request.headers[REFRESH_HEADER] === refreshSecret) {
      delete request.headers[REFRESH_HEADER]
      return
    }
    const passage: Passage = { answering: false, upstream: headerListOf(reply.getHeaders()) }
    passages.set(request, passage)
    let proceed!: () => void
    const proceeding = new Promise<'proceed'>((resolve) => (proceed = () => resolve('proceed')))
    let started = false
    const answer = route.serve(
      request,
      viewOf(request, ownHeadHandler),
      (originRequest) => {
        if (started || originRequest.background) return injected(fastify, request, originRequest)
        started = true
        return new Promise<OriginResponse>((resolve) => {
          passage.restore = presentAs(request, originRequest)
          passage.origin = resolve
          proceed()
        })
      },
      passage.upstream,
    )
    passage.answer = answer
    const first = await Promise.race([answer, proceeding])
    if (first === 'proceed') return // the handler runs; onSend takes it from there
    passage.answering = true
    const payload = await applyAnswer(reply, first, passage.upstream)
    // No body (304, 204): send nothing, or Fastify would serialize `null`.
    return payload === null ? reply.send() : reply.send(payload)
  }
  const onSend: onSendHookHandler = async function cacheOnSend(request, reply, payload) {
    const passage = passages.get(request)
    if (!passage || passage.answering || !passage.origin || !passage.answer) return payload
    const { origin } = passage
    passage.origin = undefined
    passage.restore?.()
    origin({ status: reply.statusCode, headers: headerListOf(reply.getHeaders()), body: payload as BodySource })
    const answer = await passage.answer
    passage.answering = true
    return applyAnswer(reply, answer, passage.upstream)
  }
  // The look-up is the route's last preHandler: every hook before it (authentication in
  // onRequest, preValidation or preHandler, global or the route's own) runs on a hit too,
  // and a request one of them refuses never reaches the cache (nor marks the URL uncacheable).
  routeOptions.preHandler = [...hooksOf(routeOptions.preHandler), lookup]
  routeOptions.onSend = [onSend, ...hooksOf(routeOptions.onSend)]
}

function hooksOf<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return []
  return Array.isArray(hooks) ? hooks : [hooks]
}

/** The engine's view of a Fastify request; Fastify's own HEAD route is served as its GET (Fastify drops the body). */
function viewOf(request: FastifyRequest, ownHeadHandler: boolean): HttpRequest {
  const method = request.method === 'HEAD' && !ownHeadHandler ? 'GET' : request.method
  return {
    method,
    url: request.originalUrl,
    headers: request.headers,
    scheme: request.protocol,
    rewritten: request.originalUrl !== request.url,
    ownHeadHandler,
  }
}

/** The handler sees the request as the engine runs it (validators hidden, Accept-Encoding reduced); returns the undo. */
function presentAs(request: FastifyRequest, originRequest: OriginRequest): () => void {
  const headers = request.headers
  const before = { ...headers }
  for (const name of Object.keys(headers)) if (!(name in originRequest.headers)) delete headers[name]
  Object.assign(headers, originRequest.headers)
  return () => {
    for (const name of Object.keys(headers)) delete headers[name]
    Object.assign(headers, before)
  }
}

/** A background run: the client was answered from the cache, so the handler runs on a request of its own. */
async function injected(
  fastify: FastifyInstance,
  request: FastifyRequest,
  originRequest: OriginRequest,
): Promise<OriginResponse> {
  const headers: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(originRequest.headers)) if (value !== undefined) headers[name] = value
  headers[REFRESH_HEADER] = refreshSecret
  const response = await fastify.inject({
    method: originRequest.method as 'GET',
    url: request.url,
    headers,
  })
  return {
    status: response.statusCode,
    headers: headerListOf(response.headers),
    body: response.rawPayload,
  }
}

function headerListOf(headers: Record<string, unknown>): HeaderList {
  const list: HeaderList = []
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    list.push([name, Array.isArray(value) ? value.map(String) : String(value)])
  }
  return list
}

/**
 * Puts the engine's answer on the reply: the fields set before the cache ran, minus the
 * ones the handler removed, then the answer's own; returns the payload.
 */
async function applyAnswer(reply: FastifyReply, answer: HttpAnswer, upstream: HeaderList): Promise<unknown> {
  const kept = new Set(upstream.map(([name]) => name.toLowerCase()))
  for (const name of Object.keys(reply.getHeaders())) if (!kept.has(name.toLowerCase())) reply.removeHeader(name)
  for (const name of answer.remove) reply.removeHeader(name)
  for (const [name, value] of answer.headers) reply.header(name, value)
  reply.code(answer.status)
  if (answer.statusMessage !== undefined) reply.raw.statusMessage = answer.statusMessage
  return payloadOf(answer.body)
}

function payloadOf(body: BodySource): unknown {
  if (body === undefined || body === null) return null
  if (typeof body === 'string' || body instanceof Uint8Array) return body
  if (body instanceof Readable) return body
  return Readable.from(body)
}
