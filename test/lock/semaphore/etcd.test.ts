/**
 * The etcd semaphore: counts in lease-bound keys, one FIFO line by create_revision. In one
 * process: permits, tokens, FIFO (acquire(2) ahead of acquire(1)), a wait that runs out
 * leaves the line, a revoked lease reported lost at release. Across real processes: a
 * SIGKILLed holder's permits back within about one lease, and 4 processes × 10 holders never
 * more than N inside, counted by the resource.
 */
import type { Etcd3 } from 'etcd3'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, LockBusyError, LockLostError, type Locks } from '../../../src/index.js'
import { etcdAvailable, startEtcd, type EtcdCluster } from '../../support/etcd.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'
import type { Worker } from '../../support/workers.js'
import { forkTwoAtATime } from './fork.js'
import type { AcquireReply, ContendReply, SemaphoreWorkerRequest } from './protocol.js'

describe.skipIf(!etcdAvailable || !redisAvailable)('locks.semaphore() on etcd', () => {
  let etcd: EtcdCluster
  let client: Etcd3
  let resourceServer: RedisServer
  let locks: Locks<unknown>
  let workers: Worker[] = []
  const inLine = async (name: string) => (await client.getAll().prefix(`sem/${name}/s/`).keys()).length

  beforeAll(async () => {
    ;[etcd, resourceServer] = await Promise.all([startEtcd(), startRedis()])
    client = etcd.client()
    locks = createLocks({ etcd: client, namespace: 'sem' }) as Locks<unknown>
  })
  afterEach(async () => {
    await Promise.all(workers.map((worker) => worker.stop()))
    workers = []
  })
  afterAll(async () => {
    await locks?.close()
    await Promise.all([etcd?.stop(), resourceServer?.stop()])
  })

  async function fork(n: number): Promise<Worker[]> {
    const env = {
      SEMAPHORE_WORKER: JSON.stringify({ port: 0, resourcePort: resourceServer.port, etcdHosts: etcd.hosts }),
    }
    const started = await forkTwoAtATime(new URL('./worker.ts', import.meta.url), n, env)
    workers.push(...started)
    return started
  }
  const ask = <T>(worker: Worker, request: SemaphoreWorkerRequest, timeoutMs = 60_000) =>
    worker.request<T>(request, timeoutMs)

  it('permits, tokens per permit, FIFO in line, a wait that runs out leaves the line', async () => {
    const sem = locks.semaphore('e-fifo', { permits: 2 })
    const a = await sem.acquire(1)
    const b = await sem.acquire(1)
    expect(b.token).toBeGreaterThan(a.token)
    expect(await sem.tryAcquire()).toBeUndefined()
    const order: string[] = []
    const big = sem.acquire(2, { wait: '10s' }).then((p) => (order.push('big'), p))
    await until(async () => (await inLine('e-fifo')) === 3, 'big in line')
    const small = sem.acquire(1, { wait: '10s' }).then((p) => (order.push('small'), p))
    await until(async () => (await inLine('e-fifo')) === 4, 'small in line')
    await expect(sem.acquire(1, { wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await until(async () => (await inLine('e-fifo')) === 4, 'the one that gave up to leave', 3_000)
    await a.release()
    await sleep(100)
    expect(order).toEqual([]) // one free, but big (2) is first
    await b.release()
    const bigPermits = await big
    expect(bigPermits.tokens).toHaveLength(2)
    expect(bigPermits.tokens[1]).toBe(bigPermits.tokens[0]! + 1n)
    expect(bigPermits.token).toBeGreaterThan(b.token)
    await bigPermits.release()
    await (await small).release()
    expect(order).toEqual(['big', 'small'])
    await until(async () => (await inLine('e-fifo')) === 0, 'the line to be empty', 3_000)
  })

  it('a permit whose lease was revoked is lost: signal aborts, validForMs 0, release rejects with LockLostError', async () => {
    const sem = locks.semaphore('e-lost', { permits: 1 })
    const held = await sem.acquire(1, { lease: '1s' })
    // Revoke its lease from outside, as an expiry during a partition would end it.
    const [kv] = (await client.getAll().prefix('sem/e-lost/s/').exec()).kvs
    await client.leaseClient.leaseRevoke({ ID: kv!.lease })
    await until(() => held.signal.aborted, 'the keep-alive to find the lease gone', 5_000)
    expect(held.validForMs).toBe(0)
    await expect(held.release()).rejects.toBeInstanceOf(LockLostError)
  })

  it("a SIGKILLed holder's permits come back within about one lease", async () => {
    const [holder, waiter] = await fork(2)
    const lease = 2_000
    await ask(holder!, { op: 'acquire', id: 'a', name: 'e-crash', permits: 2, count: 2, lease, wait: 0 })
    const next = ask<AcquireReply>(waiter!, {
      op: 'acquire',
      id: 'b',
      name: 'e-crash',
      permits: 2,
      count: 1,
      lease,
      wait: 30_000,
    })
    await until(async () => (await inLine('e-crash')) === 2, 'the waiter in line', 30_000)
    const killedAt = performance.now()
    holder!.kill('SIGKILL')
    await next
    const afterMs = performance.now() - killedAt
    expect(afterMs).toBeLessThan(lease + 3_000) // the lease TTL, whole seconds, counted from the last keep-alive
    console.log(`[etcd semaphore crash] permits back ${afterMs.toFixed(0)} ms after SIGKILL (lease ${lease} ms)`)
  }, 90_000)

  it('4 processes × 10 holders: never more than N inside, counted by the resource', async () => {
    const contenders = await fork(4)
    const resource = resourceServer.client()
    const name = 'e-fleet'
    const permits = 3
    await resource.del(`${name}:inside`, `${name}:max`, `${name}:entries`)
    const results = await Promise.all(
      contenders.map((worker) =>
        ask<ContendReply>(
          worker,
          { op: 'contend', name, permits, holders: 10, iterations: 2, lease: 5_000, holdMs: 3 },
          170_000,
        ),
      ),
    )
    expect(results.flatMap((r) => r.errors)).toEqual([])
    const max = Number(await resource.get(`${name}:max`))
    expect(max).toBeLessThanOrEqual(permits)
    expect(max).toBeGreaterThanOrEqual(2)
    expect(Number(await resource.get(`${name}:entries`))).toBe(4 * 10 * 2)
    await until(async () => (await inLine(name)) === 0, 'the line to be empty', 5_000)
    console.log(`[etcd semaphore fleet] 80 entries, at most ${max} inside at once (permits ${permits})`)
  }, 180_000)
})
