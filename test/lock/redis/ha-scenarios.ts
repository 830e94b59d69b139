/**
 * The Redis lock's acceptance on a Cluster or under Sentinel, shared by
 * redis-cluster.test.ts and redis-sentinel.test.ts: contention across real processes
 * (test/support/lock-worker.ts with the Redis factory), wake-up by notification counted in
 * INFO commandstats, and contention kept up through a failover.
 *
 * The occupancy counter (INCR/DECR inside the critical section) lives on a standalone
 * redis-server of its own (`check`), so a failover of the lock's store cannot touch it.
 */
import { afterAll, afterEach, beforeAll, expect } from 'vitest'
import type { Cluster, Redis } from 'ioredis'
import { createLocks, type HeldLockHandle, type Locks } from '../../../src/index.js'
import { startRedis, type RedisServer } from '../../support/redis.js'
import { until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'
import type { RedisFactoryConfig } from './coupons-factory.js'
import type { LockWorkerRequest } from '../../support/lock-worker-protocol.js'

const FACTORY = new URL('./coupons-factory.ts', import.meta.url)

export interface ContendResult {
  violations: number
  errors: string[]
}

/** A Cluster or Sentinel set-up from test/support, as useHaLocks needs it. */
export interface HaTopology {
  client(): Redis | Cluster
  stop(): Promise<void>
}

export interface HaLocks<T> {
  /** The file's Cluster or Sentinel set-up (throws before it has started). */
  topology(): T
  /** A client on the standalone `check` server. */
  check(): Redis
  /** `count` lock workers on the topology, stopped after the test. */
  fork(count: number, waitForReplicas?: { timeout: number }): Promise<Worker[]>
  /** A Locks in this process on a client of its own, closed after the test. */
  newLocks(waitForReplicas?: { timeout: number }): Locks
}

/**
 * The set-up redis-cluster.test.ts and redis-sentinel.test.ts share: the topology (`start`)
 * and the `check` server for the file, workers and Locks per test. `workerBackend` tells a
 * worker how to reach the topology. Call useHaLocks() inside the file's describe.
 */
export function useHaLocks<T extends HaTopology>(
  namespace: string,
  start: () => Promise<T>,
  workerBackend: (topology: T) => RedisFactoryConfig,
): HaLocks<T> {
  let topology: T | undefined
  let check: RedisServer | undefined
  let workers: Worker[] = []
  const locks: Locks[] = []
  beforeAll(async () => {
    ;[topology, check] = await Promise.all([start(), startRedis()])
  }, 60_000)
  afterEach(async () => {
    await Promise.all(workers.map((worker) => worker.stop()))
    workers = []
    await Promise.all(locks.splice(0).map((l) => l.close()))
  })
  afterAll(async () => {
    await topology?.stop()
    await check?.stop()
  })
  const started = () => {
    if (!topology || !check) throw new Error('the topology has not started')
    return { topology, check }
  }
  return {
    topology: () => started().topology,
    check: () => started().check.client(),
    async fork(count, waitForReplicas) {
      const { topology, check } = started()
      const forked = await forkLockWorkers(
        count,
        { ...workerBackend(topology), waitForReplicas, namespace },
        check.port,
      )
      workers.push(...forked)
      return forked
    },
    newLocks(waitForReplicas) {
      const client = started().topology.client()
      client.on('error', () => {})
      const created = createLocks({ redis: { client, waitForReplicas }, namespace })
      locks.push(created)
      return created
    },
  }
}

/** `count` lock workers on `backend`, two at a time (tsx start-up on a loaded machine is slow). */
export async function forkLockWorkers(
  count: number,
  backend: RedisFactoryConfig,
  checkPort: number,
): Promise<Worker[]> {
  const env = { LOCK_WORKER_CONFIG: JSON.stringify({ backend, checkPort }) }
  const started: Worker[] = []
  try {
    while (started.length < count) {
      started.push(
        ...(await Promise.all(
          Array.from({ length: Math.min(2, count - started.length) }, () =>
            forkWorker(new URL('../../support/lock-worker.ts', import.meta.url), { args: [FACTORY.pathname], env }),
          ),
        )),
      )
    }
  } catch (error) {
    await Promise.all(started.map((worker) => worker.stop()))
    throw error
  }
  return started
}

export const ask = <T>(worker: Worker, request: LockWorkerRequest, timeoutMs = 120_000) =>
  worker.request<T>(request, timeoutMs)

/** Every worker runs `iterations` withLock calls on `key`: never two inside at once, and every entry counted. */
export async function expectOneHolderAtATime(
  workers: Worker[],
  check: Redis,
  key: string,
  iterations: number,
): Promise<void> {
  await check.del('inside', 'entries')
  const results = await Promise.all(
    workers.map((worker) => ask<ContendResult>(worker, { op: 'contend', key, iterations, lease: 2_000 }, 180_000)),
  )
  expect(results.map((r) => r.violations)).toEqual(workers.map(() => 0))
  expect(Number(await check.get('entries'))).toBe(workers.length * iterations)
  expect(Number(await check.get('inside'))).toBe(0)
}

/**
 * `holder` holds `key` while every worker waits on it: once all are subscribed
 * (`subscribers()`), 2 s of holding cost at most the holder's own renewals in script calls
 * (`scriptCalls()`, summed over the store's nodes), and the release wakes one at once.
 * Then each waiter takes and releases it in turn.
 */
export async function expectWokenByNotification(o: {
  workers: Worker[]
  holder: HeldLockHandle<unknown>
  key: string
  lease: number
  subscribers: () => Promise<number>
  scriptCalls: () => Promise<number>
}): Promise<{ during: number; handoffMs: number }> {
  const pending = o.workers.map((worker) =>
    ask<{ token: string }>(worker, { op: 'acquire', key: o.key, lease: o.lease, wait: 30_000 }),
  )
  // A failed expectation below must not leave these to reject unhandled when the workers stop.
  for (const p of pending) p.catch(() => undefined)
  await until(
    async () => (await o.subscribers()) === o.workers.length,
    `all ${o.workers.length} waiters to subscribe`,
    30_000,
  )
  const before = await o.scriptCalls()
  const heldFrom = performance.now()
  await new Promise((resolve) => setTimeout(resolve, 2_000)) // hold
  const during = (await o.scriptCalls()) - before
  const heldMs = performance.now() - heldFrom
  // Allowed: the holder's renewals (every lease/3), and each waiter's one safety poll when the
  // lease it last saw would end (renewed, that is at least 2/3 of a lease apart). A 50 ms → 1 s
  // backoff poll would cost ≥ 5 per waiter in 2 s. Counted over the time actually held: a busy
  // box's timer may fire late, and a renewal or poll more falls in.
  const renewals = Math.ceil(heldMs / (o.lease / 3))
  const safetyPolls = o.workers.length * Math.ceil(heldMs / ((2 * o.lease) / 3))
  expect(during).toBeLessThanOrEqual(renewals + safetyPolls)
  expect(during).toBeLessThan(5 * o.workers.length)
  const releasedAt = performance.now()
  await o.holder.release()
  const first = await Promise.race(pending.map((p, index) => p.then(() => index)))
  const handoffMs = performance.now() - releasedAt
  // A waiter asleep until the lease's end would have slept ≥ lease − 2 s more (3 s at the callers'
  // 5 s lease); the message woke it. The bound stays under that, with room for a busy box's IPC.
  expect(handoffMs).toBeLessThan(2_500)
  const remaining = new Map(pending.map((promise, index) => [index, promise]))
  for (let current = first; ;) {
    remaining.delete(current)
    await ask(o.workers[current]!, { op: 'release', key: o.key })
    if (remaining.size === 0) break
    current = await Promise.race([...remaining].map(([index, promise]) => promise.then(() => index)))
  }
  return { during, handoffMs }
}

/**
 * Every worker contends on `key` (tolerating failed calls) while `failover()` runs, until
 * the lock has been taken `after` more times once the failover is over. Returns the
 * violations (two holders at once, seen by INCR), the failed calls, and the entries.
 */
export async function contendThroughFailover(o: {
  workers: Worker[]
  check: Redis
  key: string
  lease: number
  failover: () => Promise<void>
  after?: number
}): Promise<{ violations: number; errors: string[]; entries: number; failoverMs: number }> {
  const { check } = o
  await check.del('inside', 'entries', 'stop')
  const entries = async () => Number(await check.get('entries'))
  const runs = o.workers.map((worker) =>
    ask<ContendResult>(
      worker,
      { op: 'contend', key: o.key, iterations: 1_000_000, lease: o.lease, tolerateErrors: true, stopKey: 'stop' },
      180_000,
    ),
  )
  try {
    await until(async () => (await entries()) >= 20, 'the contention to get going', 60_000)
    const startedAt = performance.now()
    await o.failover()
    const failoverMs = performance.now() - startedAt
    const at = await entries()
    await until(
      async () => (await entries()) >= at + (o.after ?? 20),
      'the lock to be taken again after the failover',
      60_000,
    )
    await check.set('stop', '1')
    const results = await Promise.all(runs)
    expect(Number(await check.get('inside'))).toBe(0)
    return {
      violations: results.reduce((sum, r) => sum + r.violations, 0),
      errors: results.flatMap((r) => r.errors),
      entries: await entries(),
      failoverMs,
    }
  } finally {
    await check.set('stop', '1')
    await Promise.allSettled(runs)
  }
}

/** Calls of `command` on `client`'s node since its last RESETSTAT. */
export async function commandCalls(client: Redis, command: string): Promise<number> {
  const info = await client.info('commandstats')
  return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0)
}
