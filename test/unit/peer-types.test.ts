/**
 * The structural types the public API uses instead of the optional peers' own (and
 * ioredis's): each real class must fit its shape. `npm run typecheck` checks the
 * assignments below; at run time each real object (built without connecting) passes
 * the shape check the option validation relies on.
 */
import { metrics, trace, type Meter, type Tracer } from '@opentelemetry/api'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base'
import { Etcd3, type ComparatorBuilder, type Namespace } from 'etcd3'
import type { Request, Response, NextFunction } from 'express'
import type { Context, MiddlewareHandler } from 'hono'
import { Cluster, Redis } from 'ioredis'
import type * as Msgpackr from 'msgpackr'
import type { ExecutionContext, NestInterceptor } from '@nestjs/common'
import type { Middleware as KoaMiddleware, ParameterizedContext } from 'koa'
import zookeeper, { type Client, type Transaction } from 'node-zookeeper-client'
import { describe, expect, it } from 'vitest'
import type { NextFunctionLike, RequestLike, ResponseLike } from '../../src/express/http-types.js'
import type { cacheRoute as honoCacheRoute, HonoContextLike } from '../../src/hono/index.js'
import type { KoaContextLike, KoaMiddlewareLike } from '../../src/koa/index.js'
import type { CacheRouteInterceptor, ExecutionContextLike } from '../../src/nestjs/index.js'
import type { EtcdClientLike, EtcdTxnLike } from '../../src/lock/etcd/client-like.js'
import type { ZooKeeperClientLike, ZooKeeperTransactionLike } from '../../src/lock/zookeeper/client-like.js'
import type { MeterLike, TracerLike } from '../../src/observability/otel-like.js'
import type { MsgpackrLike } from '../../src/msgpack-codec.js'
import type { RedisClientLike } from '../../src/redis-client.js'

// Compile-time: the peers' own types are assignable to the shapes (a mismatch fails `npm run typecheck`).
type Fits<T extends Shape, Shape> = T
export type Checked = [
  Fits<Redis, RedisClientLike>,
  Fits<Context, HonoContextLike>,
  Fits<ReturnType<typeof honoCacheRoute>, MiddlewareHandler>,
  Fits<ParameterizedContext, KoaContextLike>,
  Fits<KoaMiddlewareLike, KoaMiddleware>,
  Fits<ExecutionContext, ExecutionContextLike>,
  Fits<CacheRouteInterceptor, NestInterceptor>,
  Fits<Cluster, RedisClientLike>,
  Fits<Etcd3, EtcdClientLike>,
  Fits<Namespace, EtcdClientLike>,
  Fits<ComparatorBuilder, EtcdTxnLike>,
  Fits<Client, ZooKeeperClientLike>,
  Fits<Transaction, ZooKeeperTransactionLike>,
  Fits<Meter, MeterLike>,
  Fits<Tracer, TracerLike>,
  Fits<Request, RequestLike>,
  Fits<Response, ResponseLike>,
  Fits<NextFunction, NextFunctionLike>,
  Fits<typeof Msgpackr, MsgpackrLike>,
]

function functionsOf(value: object, names: readonly string[]): Record<string, string> {
  return Object.fromEntries(names.map((name) => [name, typeof (value as Record<string, unknown>)[name]]))
}
const allFunctions = (names: readonly string[]) => Object.fromEntries(names.map((name) => [name, 'function']))

describe('the real clients have the members the shapes name', () => {
  it('ioredis Redis and Cluster: status, isCluster, defineCommand, duplicate', () => {
    const redis = new Redis({ lazyConnect: true })
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true })
    for (const [client, isCluster] of [
      [redis, false],
      [cluster, true],
    ] as const) {
      expect(typeof client.status).toBe('string')
      expect(client.isCluster).toBe(isCluster)
      expect(functionsOf(client, ['defineCommand', 'duplicate'])).toEqual(allFunctions(['defineCommand', 'duplicate']))
    }
    redis.disconnect()
    cluster.disconnect()
  })

  it('etcd3: the client and a namespace of it; a txn', () => {
    const etcd = new Etcd3({ hosts: '127.0.0.1:1' })
    const names = ['lease', 'watch', 'getAll', 'if']
    expect(functionsOf(etcd, names)).toEqual(allFunctions(names))
    expect(functionsOf(etcd.namespace('x/'), names)).toEqual(allFunctions(names))
    const txn = ['and', 'then', 'else', 'commit']
    expect(functionsOf(etcd.if('k', 'Create', '==', 0), txn)).toEqual(allFunctions(txn))
    etcd.close()
  })

  it('node-zookeeper-client: the client and a transaction', () => {
    const client = zookeeper.createClient('127.0.0.1:1')
    const names = ['create', 'getChildren', 'transaction', 'getSessionTimeout']
    expect(functionsOf(client, names)).toEqual(allFunctions(names))
    const ops = ['create', 'setData', 'check', 'remove', 'commit']
    expect(functionsOf(client.transaction(), ops)).toEqual(allFunctions(ops))
    // Never connected: nothing to close (close() on an unconnected client throws).
  })

  it('OpenTelemetry: an SDK Meter and Tracer, and the API defaults', () => {
    const meter = new MeterProvider().getMeter('t')
    const names = ['createCounter', 'createHistogram', 'addBatchObservableCallback']
    expect(functionsOf(meter, names)).toEqual(allFunctions(names))
    expect(functionsOf(metrics.getMeter('t'), names)).toEqual(allFunctions(names))
    expect(typeof new BasicTracerProvider().getTracer('t').startSpan).toBe('function')
    expect(typeof trace.getTracer('t').startSpan).toBe('function')
  })
})
