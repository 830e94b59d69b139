/**
 * The setup of a cross-process test file: one redis-server for the file, an admin client
 * on it, and worker processes forked per test. After each test the workers are stopped
 * and Redis is flushed. Call useWorkerSuite() inside the file's describe (it registers
 * the hooks).
 */
import type { Redis } from 'ioredis'
import { afterAll, afterEach, beforeAll } from 'vitest'
import { startRedis, type RedisServer } from './redis.js'
import { forkWorker, type Worker } from './workers.js'

export interface WorkerSuite {
  /**
   * Fork `count` copies of the suite's worker module with `env` plus REDIS_URL (the
   * file's redis-server); resolves once all are ready. They are stopped after the test.
   */
  spawn(count: number, env?: Record<string, string>): Promise<Worker[]>
  /** Every worker spawned by the current test, in spawn order. */
  workers(): Worker[]
  /** The file's redis-server. */
  server(): RedisServer
  /** An admin client on it, for reading and setting keys around the workers. */
  redis(): Redis
}

export function useWorkerSuite(workerModule: URL): WorkerSuite {
  let server: RedisServer | undefined
  let redis: Redis | undefined
  let workers: Worker[] = []

  beforeAll(async () => {
    server = await startRedis()
    redis = server.client()
  })
  afterAll(async () => {
    await server?.stop()
  })
  afterEach(async () => {
    await Promise.all(workers.map((worker) => worker.stop()))
    workers = []
    await redis?.flushall()
  })

  const started = (): RedisServer => server ?? fail('the redis-server has not started')
  return {
    async spawn(count, env = {}) {
      const url = started().url
      const forked = await Promise.all(
        Array.from({ length: count }, () => forkWorker(workerModule, { env: { REDIS_URL: url, ...env } })),
      )
      workers.push(...forked)
      return forked
    },
    workers: () => workers,
    server: started,
    redis: () => redis ?? fail('the redis-server has not started'),
  }
}

function fail(why: string): never {
  throw new Error(why)
}
