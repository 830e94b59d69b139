/** What a bench contender is, and the adapter for any `createLocks` backend. */
import type { Locks } from '../../src/index.js'

export interface BenchLock {
  /** Takes `key`, waiting up to `waitMs`; resolves the release. */
  acquire(key: string, waitMs: number): Promise<() => Promise<void>>
  close(): Promise<void>
}

export interface BenchEnv {
  /** Independent redis-servers; the first one is "the" Redis of the single-node locks. */
  redisUrls: string[]
  /** Client URLs of the etcd member the bench started (absent: etcd not installed). */
  etcdHosts?: string[] | undefined
  /** Connection string of the ZooKeeper server the bench started (absent: not installed). */
  zookeeper?: string | undefined
}

export interface BenchContender {
  name: string
  describe: string
  /** A reason this contender cannot run here, or undefined. */
  unavailable?(env: BenchEnv): string | undefined
  create(env: BenchEnv): Promise<BenchLock>
}

/** The lease every contender takes. */
export const LEASE_MS = 5_000

/** A contender built on `createLocks`, whatever its backend; `closeClients` ends the clients it was given. */
export function fromLocks(locks: Locks<unknown>, closeClients: () => void | Promise<void>): BenchLock {
  return {
    async acquire(key, waitMs) {
      const held = await locks.acquire(key, { wait: waitMs, lease: LEASE_MS })
      return () => held.release()
    },
    async close() {
      await locks.close()
      await closeClients()
    },
  }
}
