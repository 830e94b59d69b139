/**
 * The locks `npm run bench:lock` measures, each behind one small adapter. Add a backend
 * (etcd, ZooKeeper, PostgreSQL, …) with one entry in `BENCH_CONTENDERS`: the bench
 * starts nothing for it, so its `create` connects to what its env names (or the entry
 * is skipped with `unavailable`).
 */
import { Redis } from 'ioredis'
import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock'
import { createLocks } from '../../src/index.js'
import { SpinLockBackend } from '../shared/baseline-backends.js'
import { fromLocks, LEASE_MS, type BenchContender, type BenchLock } from './contender.js'
import { CONSENSUS_BENCH_CONTENDERS } from './consensus-contenders.js'
import { DB_BENCH_CONTENDERS } from './db-contenders.js'

/** A bench client: errors are the bench's outcome to report, not an unhandled event. */
function client(url: string): Redis {
  return new Redis(url).on('error', () => {})
}

const disconnect = (clients: Redis[]) => () => clients.forEach((c) => c.disconnect())

function fromSesame(clients: Redis[]): BenchLock {
  // Its defaults: retry every 200 ms ± 100 ms jitter; retryCount sized to the wait per call.
  const redlock = new SesameRedlock(clients)
  return {
    async acquire(key, waitMs) {
      const lock = await redlock.acquire([key], LEASE_MS, { retryCount: Math.ceil(waitMs / 200) + 1 })
      return async () => {
        await lock.release()
      }
    },
    async close() {
      for (const client of clients) client.disconnect()
    },
  }
}

export const BENCH_CONTENDERS: BenchContender[] = [
  {
    name: 'stampede-guard redis',
    describe: 'createLocks({ redis }): token in acquire.lua, pub/sub wake-up, watchdog',
    async create(env) {
      const redis = client(env.redisUrls[0]!)
      return fromLocks(createLocks({ redis, namespace: 'bench-sg' }), disconnect([redis]))
    },
  },
  {
    name: 'stampede-guard redis (fair)',
    describe: "createLocks({ redis, fair: true }): FIFO line in the lock's keys, the head woken alone",
    async create(env) {
      const redis = client(env.redisUrls[0]!)
      return fromLocks(createLocks({ redis, namespace: 'bench-sg', fair: true }), disconnect([redis]))
    },
  },
  {
    name: 'seed spin lock',
    describe: 'SET NX PX, else sleep 100 ms and retry; compare-and-delete release',
    async create(env) {
      const redis = client(env.redisUrls[0]!)
      const backend = new SpinLockBackend(redis, 'bench-spin', 100, 1_000)
      return {
        async acquire(key, waitMs) {
          const held = await backend.acquire({ key, leaseMs: LEASE_MS, waitMs, signal: new AbortController().signal })
          if (!held) throw new Error(`spin lock: ${key} still busy`)
          return () => held.release()
        },
        async close() {
          redis.disconnect()
        },
      }
    },
  },
  {
    name: '@sesamecare-oss/redlock 1 node',
    describe: 'node-redlock v5 fork, one Redis: retry every 200 ± 100 ms',
    async create(env) {
      return fromSesame([client(env.redisUrls[0]!)])
    },
  },
  {
    name: 'stampede-guard redlock 5 nodes',
    describe: 'createLocks({ redlock: 5 clients }): quorum 3, wake-up on one node',
    unavailable: (env) => (env.redisUrls.length < 5 ? 'needs 5 redis-servers' : undefined),
    async create(env) {
      const nodes = env.redisUrls.slice(0, 5).map((url) => client(url))
      return fromLocks(createLocks({ redlock: nodes, namespace: 'bench-rl' }), disconnect(nodes))
    },
  },
  {
    name: '@sesamecare-oss/redlock 5 nodes',
    describe: 'node-redlock v5 fork over the same 5 servers',
    unavailable: (env) => (env.redisUrls.length < 5 ? 'needs 5 redis-servers' : undefined),
    async create(env) {
      return fromSesame(env.redisUrls.slice(0, 5).map((url) => client(url)))
    },
  },
  // PostgreSQL and MariaDB (issue 12)
  ...DB_BENCH_CONTENDERS,
  // etcd and ZooKeeper (issue 13)
  ...CONSENSUS_BENCH_CONTENDERS,
]
