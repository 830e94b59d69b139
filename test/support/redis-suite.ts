/**
 * The setup of a test file that runs against one real redis-server of its own: the server
 * is started before the file's first test and stopped after its last, with an admin client
 * on it. Clients from `client()` are disconnected after each test; `flush` also empties
 * Redis then. Call useRedisServer() inside the file's describe (its hooks are that block's).
 */
import type { Redis, RedisOptions } from 'ioredis'
import { afterAll, afterEach, beforeAll } from 'vitest'
import { startRedis, type RedisServer, type StartRedisOptions } from './redis.js'

export interface RedisSuiteOptions extends StartRedisOptions {
  /** FLUSHALL after each test (after `cleanup`), so no test sees another's keys. Default false. */
  flush?: boolean
  /** Also connect the client `shared()` returns, before the first test. Default false. */
  shared?: boolean
  /**
   * Runs after each test before the suite's clients are disconnected: close what uses them
   * here (caches, lock factories, workers), so nothing sees its connection drop under it.
   */
  cleanup?: () => unknown
}

export interface RedisSuite {
  /** The file's redis-server (throws before it has started). */
  server(): RedisServer
  /** An admin client, for reading and setting keys around the code under test. */
  admin(): Redis
  /** Another client on the server, disconnected after the test. */
  client(options?: RedisOptions): Redis
  /** One client kept for the whole file, as a process's one connection (needs `shared: true`). */
  shared(): Redis
}

export function useRedisServer(options: RedisSuiteOptions = {}): RedisSuite {
  const { flush = false, shared: withShared = false, cleanup, ...start } = options
  let server: RedisServer | undefined
  let admin: Redis | undefined
  let shared: Redis | undefined
  const clients: Redis[] = []

  beforeAll(async () => {
    server = await startRedis(start)
    admin = server.client()
    // Connected here, not on first use: a test counting connections must not see it appear.
    if (withShared) shared = server.client()
  })
  afterAll(async () => {
    // stop() disconnects every client of the server (admin and shared included) first.
    await server?.stop()
  })
  afterEach(async () => {
    await cleanup?.()
    for (const client of clients.splice(0)) client.disconnect()
    if (flush) await admin?.flushall()
  })

  const started = (): RedisServer => {
    if (!server) throw new Error('the redis-server has not started')
    return server
  }
  return {
    server: started,
    admin: () => {
      started()
      return admin!
    },
    client(clientOptions) {
      const redis = started().client(clientOptions)
      clients.push(redis)
      return redis
    },
    shared: () => {
      started()
      if (!shared) throw new Error('useRedisServer({ shared: true }) makes the shared client')
      return shared
    },
  }
}

/**
 * For tests that pause, kill or restart their server, which no other test should share:
 * `start()` gives the calling test a redis-server of its own, stopped after that test
 * (after `cleanup`). Call useRedisPerTest() inside the file's describe.
 */
export function useRedisPerTest(cleanup?: () => unknown): { start(options?: StartRedisOptions): Promise<RedisServer> } {
  let server: RedisServer | undefined
  afterEach(async () => {
    await cleanup?.()
    await server?.stop()
    server = undefined
  })
  return {
    async start(options) {
      server = await startRedis(options)
      return server
    },
  }
}
