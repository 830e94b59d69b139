/**
 * Shared pieces of the route-middleware tests: one listening server per app (so every
 * request has the same Host, which is part of the key), raw HTTP for byte-level checks,
 * a cache per test on the file's real redis-server, a harness that builds the usual
 * one-route app, and gates to hold handlers.
 */
import http, { type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import express, { type Express, type RequestHandler } from 'express'
import request from 'supertest'
import { afterAll, afterEach, beforeAll } from 'vitest'
import { cacheRoute, type CacheRouteOptions } from '../../src/express/index.js'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { startRedis, type RedisServer } from '../support/redis.js'

export { gate, sleep, until } from '../support/timing.js'

/** The Host every test request sends: keys depend on it, ports do not. */
export const HOST = 'shop.test'

export interface Served {
  port: number
  /** supertest on this server, with `Host: shop.test` preset. */
  get(path: string): request.Test
  head(path: string): request.Test
  post(path: string): request.Test
  /** Any method, e.g. `call('patch', '/r')`. */
  call(method: 'get' | 'head' | 'post' | 'put' | 'patch' | 'delete' | 'options', path: string): request.Test
  close(): Promise<void>
}

export async function serve(app: Express): Promise<Served> {
  const server = http.createServer(app)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const agent = request(server)
  return {
    port: (server.address() as AddressInfo).port,
    get: (path) => agent.get(path).set('Host', HOST),
    head: (path) => agent.head(path).set('Host', HOST),
    post: (path) => agent.post(path).set('Host', HOST),
    call: (method, path) => agent[method](path).set('Host', HOST),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

export interface RawResponse {
  status: number
  headers: IncomingHttpHeaders
  /** Exactly the bytes on the wire (no decompression). */
  body: Buffer
}

/** A plain HTTP request, without supertest's decompression or parsing. */
export function raw(
  port: number,
  path: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: options.method ?? 'GET',
        headers: { host: HOST, ...options.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end()
  })
}

let namespaces = 0

/** A cache on `server` with a namespace of its own, so tests never see each other's entries. */
export function testCache(server: RedisServer | undefined, options: Partial<CacheOptions> = {}): Cache {
  const client = server?.client({ maxRetriesPerRequest: 1 })
  client?.on('error', () => {}) // outages are the point of some tests; the cache reports them itself
  return createCache({
    ...(client ? { redis: client } : {}),
    namespace: `t${process.pid}-${++namespaces}`,
    ttl: '30s',
    ...options,
  })
}

export interface RouteHarnessOptions {
  /** `'all'` (the default) routes every method to the handler; `'get'` only GET (and HEAD). */
  method?: 'all' | 'get'
  /** The cacheRoute options every route starts from; default `{ ttl: '30s', xCacheHeader: true }`. */
  defaults?: CacheRouteOptions
  /** Applied to each new app before the route is added (app settings such as 'trust proxy'). */
  configure?: (app: Express) => void
  /** The Express to build apps with (the `express4` alias for Express 4); default Express 5. */
  express?: () => Express
}

/** Where the route sits: its path (default `/r`) and middleware around cacheRoute. */
export interface RoutePlacement {
  path?: string
  before?: RequestHandler[]
  after?: RequestHandler[]
}

export interface RouteHarness {
  /**
   * A new cache (on the file's redis-server) and app with one route behind cacheRoute
   * (`defaults` then `options`), ending in `handler`, counted in `runs()`; served, and
   * closed after the test.
   */
  route(handler: RequestHandler, options?: Partial<CacheRouteOptions>, placement?: RoutePlacement): Promise<Served>
  /** How many times the handler ran in this test. */
  runs(): number
  /** The cache of the last `route()`. */
  cache(): Cache
  /** The file's redis-server. */
  redis(): RedisServer
  /** A new cache and an app built by `build` (routes and all), served and closed after the test. */
  app(build: (app: Express, cache: Cache) => void): Promise<Served>
}

/**
 * The setup of a file of route tests: call inside its describe. Starts one redis-server
 * for the file; after each test closes the served app and its cache and resets `runs()`.
 */
export function useRouteHarness(harness: RouteHarnessOptions = {}): RouteHarness {
  const {
    method = 'all',
    defaults = { ttl: '30s', xCacheHeader: true },
    configure,
    express: makeApp = express,
  } = harness
  let redis: RedisServer | undefined
  let cache: Cache | undefined
  let served: Served | undefined
  let runs = 0

  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
  })
  afterEach(async () => {
    await served?.close()
    await cache?.close()
    served = undefined
    runs = 0
  })

  return {
    async route(handler, options = {}, { path = '/r', before = [], after = [] } = {}) {
      cache = testCache(redis)
      const app = makeApp()
      configure?.(app)
      const handlers: RequestHandler[] = [
        ...before,
        cacheRoute(cache, { ...defaults, ...options }),
        ...after,
        (req, res, next) => {
          runs++
          return handler(req, res, next)
        },
      ]
      if (method === 'get') app.get(path, ...handlers)
      else app.all(path, ...handlers)
      served = await serve(app)
      return served
    },
    async app(build) {
      cache = testCache(redis)
      const app = makeApp()
      configure?.(app)
      build(app, cache)
      served = await serve(app)
      return served
    },
    runs: () => runs,
    cache: () => cache ?? unset('cache(): no route() yet in this test'),
    redis: () => redis ?? unset('redis(): the redis-server has not started'),
  }
}

function unset(what: string): never {
  throw new Error(what)
}
