/**
 * createLocks infers `resource` from the backend option (checked by `npm run typecheck`:
 * a wrong inference fails to compile). The factories are never called: no server needed.
 */
import type { Etcd3 } from 'etcd3'
import type { Redis } from 'ioredis'
import type mysql from 'mysql2/promise'
import type { Client as ZooKeeperClient } from 'node-zookeeper-client'
import type pg from 'pg'
import { describe, expectTypeOf, it } from 'vitest'
import { createLocks, type Locks } from '../../src/index.js'
import type { EtcdFencedWrites, ZooKeeperFencedWrites } from '../../src/lock/index.js'
import type { LockBackend } from '../../src/lock/backend.js'

declare const pool: pg.Pool
declare const redis: Redis
declare const etcd: Etcd3
declare const zookeeper: ZooKeeperClient
declare const mysqlPool: mysql.Pool
declare const custom: LockBackend<{ lane: number }>

describe('createLocks infers the resource type', () => {
  it('postgres: the pool’s own client in transaction mode, undefined in session mode', () => {
    const inferred = () => createLocks({ postgres: pool })
    expectTypeOf(inferred).returns.toEqualTypeOf<Locks<pg.PoolClient>>()
    const withOptions = () => createLocks({ postgres: { pool, schema: 'locks' }, lease: '5s' })
    expectTypeOf(withOptions).returns.toEqualTypeOf<Locks<pg.PoolClient>>()
    const session = () => createLocks({ postgres: { pool, mode: 'session' } })
    expectTypeOf(session).returns.toEqualTypeOf<Locks<undefined>>()
    const inFn = () => createLocks({ postgres: pool }).withLock('k', async (lock) => lock.resource)
    expectTypeOf(inFn).returns.resolves.toEqualTypeOf<pg.PoolClient>()
  })

  it('redis, redlock, mysql: nothing to hand over', () => {
    expectTypeOf(redisLocks).returns.toEqualTypeOf<Locks<void>>()
    expectTypeOf(redlockLocks).returns.toEqualTypeOf<Locks<void>>()
    expectTypeOf(mysqlLocks).returns.toEqualTypeOf<Locks<undefined>>()
  })

  it('etcd and zookeeper: owner-checked writes', () => {
    expectTypeOf(etcdLocks).returns.toEqualTypeOf<Locks<EtcdFencedWrites>>()
    expectTypeOf(zookeeperLocks).returns.toEqualTypeOf<Locks<ZooKeeperFencedWrites>>()
  })

  it('backend: its own resource; an explicit type argument still works', () => {
    expectTypeOf(customLocks).returns.toEqualTypeOf<Locks<{ lane: number }>>()
    const explicit = () => createLocks<pg.PoolClient | undefined>({ backend: custom as never })
    expectTypeOf(explicit).returns.toEqualTypeOf<Locks<pg.PoolClient | undefined>>()
  })
})

const redisLocks = () => createLocks({ redis, namespace: 'n' })
const redlockLocks = () => createLocks({ redlock: [redis, redis, redis] })
const mysqlLocks = () => createLocks({ mysql: mysqlPool })
const etcdLocks = () => createLocks({ etcd })
const zookeeperLocks = () => createLocks({ zookeeper })
const customLocks = () => createLocks({ backend: custom })
