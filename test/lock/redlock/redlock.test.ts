/** Redlock against 5 real, independent redis-servers. */
import type { Redis } from 'ioredis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  createLocks,
  FencingUnsupportedError,
  LockBackendError,
  LockBusyError,
  LockLostError,
  type Locks,
} from '../../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'
import type { LockWorkerRequest } from '../../support/lock-worker-protocol.js'

describe.skipIf(!redisAvailable)('Redlock over 5 redis-servers', () => {
  let servers: RedisServer[] = []
  let clients: Redis[] = []
  let locks: Locks
  let workers: Worker[] = []
  beforeEach(async () => {
    servers = await Promise.all(Array.from({ length: 5 }, () => startRedis()))
    // One retry, no offline queue: a dead node answers "no" at once instead of queueing.
    clients = servers.map((server) =>
      server.client({ maxRetriesPerRequest: 1, enableOfflineQueue: false }).on('error', () => {}),
    ) // killed nodes: expected
    await Promise.all(clients.map((client) => until(() => client.status === 'ready', 'the node client to connect')))
    locks = createLocks({ redlock: { nodes: clients, nodeTimeout: 200 }, namespace: 'coupons' })
  })
  afterEach(async () => {
    await locks?.close()
    await Promise.all(workers.map((worker) => worker.stop()))
    workers = []
    await Promise.all(servers.map((server) => server.stop()))
  })

  const holders = async (key: string) =>
    (await Promise.all(clients.map((c) => c.exists(`coupons:{l:${key}}:lock`).catch(() => 0)))).reduce(
      (a, b) => a + b,
      0,
    )

  it('takes the lock on a quorum, releases it on all nodes, and withholds the token', async () => {
    const held = await locks.acquire('k')
    expect(await holders('k')).toBe(5)
    expect(() => held.token).toThrow(FencingUnsupportedError)
    await held.release()
    expect(await holders('k')).toBe(0)
  })

  it('with 2 of 5 nodes killed it still acquires', async () => {
    await servers[0]!.kill()
    await servers[3]!.kill()
    const held = await locks.acquire('k', { wait: '5s' })
    expect(held.signal.aborted).toBe(false)
    await held.release()
  })

  it('with 3 of 5 nodes killed acquisition fails with LockBackendError, not LockBusyError, and quickly', async () => {
    await Promise.all([servers[0]!.kill(), servers[2]!.kill(), servers[4]!.kill()])
    const startedAt = performance.now()
    const error = await locks.acquire('k', { wait: '30s' }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockBackendError)
    expect((error as LockBackendError).backend).toBe('redlock')
    expect((error as Error).message).toMatch(/quorum needs 3/)
    expect(performance.now() - startedAt).toBeLessThan(5_000)
  })

  it("nodes restarting empty do not let a second holder in while the first holder's validity lasts", async () => {
    const first = await locks.acquire('k', { lease: '10s' })
    // Two of the five forget the lock (a restart without persistence).
    for (const index of [1, 3]) {
      await servers[index]!.kill()
      await servers[index]!.restart()
    }
    await Promise.all(
      clients.map((client) => until(() => client.status === 'ready', 'the node clients to reconnect', 15_000)),
    )
    const other = createLocks({ redlock: clients, namespace: 'coupons' })
    expect(await other.tryAcquire('k')).toBeUndefined() // 2 votes of 5: no quorum
    await expect(other.acquire('k', { wait: 300 })).rejects.toBeInstanceOf(LockBusyError)
    expect(first.signal.aborted).toBe(false)
    await first.release()
    const second = await other.acquire('k', { wait: '5s' })
    await second.release()
    await other.close()
  })

  it('loses the lock (signal aborts) when extensions cannot reach a quorum', async () => {
    const held = await locks.acquire('k', { lease: 600 })
    await Promise.all([servers[0]!.kill(), servers[1]!.kill(), servers[2]!.kill()])
    await until(() => held.signal.aborted, 'the holder to learn it lost the lock', 10_000)
    expect(held.signal.reason).toBeInstanceOf(LockLostError)
    await held.release().catch(() => {})
  })

  it('the documented hazard: a holder SIGSTOPped past its validity lets another process in', async () => {
    const env = {
      LOCK_WORKER_CONFIG: JSON.stringify({
        backend: { ports: servers.map((s) => s.port) },
        checkPort: servers[0]!.port,
      }),
    }
    const paused = await forkWorker(new URL('../../support/lock-worker.ts', import.meta.url), {
      args: [new URL('./coupons-factory.ts', import.meta.url).pathname],
      env,
    })
    workers.push(paused)
    const ask = <T>(request: LockWorkerRequest) => paused.request<T>(request, 30_000)
    const { token } = await ask<{ token: string | null }>({ op: 'acquire', key: 'k', lease: 800, wait: 0 })
    expect(token).toBeNull() // Redlock: no token to fence with
    paused.kill('SIGSTOP') // GC pause: its lease runs out while it believes it holds the lock
    const intruder = await locks.acquire('k', { wait: '20s' })
    // Two holders now, as far as each knows: nothing but a fencing token could have told
    // the resource, and Redlock has none. This is why docs/locks.md says to use the Redis
    // backend (or etcd/ZooKeeper/PostgreSQL) when correctness, not efficiency, is at stake.
    expect(intruder.signal.aborted).toBe(false)
    paused.kill('SIGCONT')
    await until(
      async () => (await ask<{ aborted: boolean }>({ op: 'state', key: 'k' })).aborted,
      'the paused holder to see the loss once it runs',
      10_000,
    )
    await intruder.release()
  }, 60_000)
})
