/**
 * The tests every non-Redis semaphore backend passes alike (etcd, PostgreSQL, ZooKeeper),
 * registered inside the backend's describe by `semaphoreBackendSuite()`. In one process:
 * permits, tokens per permit, FIFO in line (acquire(2) ahead of acquire(1)), a wait that
 * runs out leaves the line. Across real processes (./worker.ts): a SIGKILLed holder's
 * permits back within about one lease (or session), and 4 processes never more than N
 * inside, counted by the protected resource; then the peers' known failures the Redis
 * semaphore is also tested for (./backend-known-failures.ts). Each backend's own known
 * failures stay in its file.
 */
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { LockBusyError, type Locks } from '../../../src/index.js'
import { startRedis, type RedisServer } from '../../support/redis.js'
import { sleep, until } from '../../support/timing.js'
import type { Worker } from '../../support/workers.js'
import { forkTwoAtATime } from './fork.js'
import { knownFailureTests } from './backend-known-failures.js'
import type { AcquireReply, ContendReply, SemaphoreWorkerConfig, SemaphoreWorkerRequest } from './protocol.js'

export interface SemaphoreBackendUnderTest {
  /** Log label and name prefix of every semaphore the suite uses. */
  label: string
  /**
   * Starts the store; resolves the front on it, what a worker needs to reach it, and for the
   * connection-reset test the store's TCP port and a worker's config through a proxy on `proxyPort`.
   */
  start(): Promise<StartedStore>
  /** Acquirers waiting in line on `name` (the backend's own records); holders too when `countsHolders`. */
  inLine(name: string): Promise<number>
  /** Do `inLine`'s records include the holders (etcd: one FIFO line of holders and waiters)? */
  countsHolders: boolean
  /** Nothing of `name` is left in the store: no holder, no waiter. */
  empty(name: string): Promise<boolean>
  /** The crashed holder's permits must be back within this, ms, with this lease. */
  crash: { lease: number; withinMs: number }
  /** Holders per process in the fleet test, and how long each holds its permit (ms): long enough for N to overlap. */
  fleet: { holders: number; holdMs: number }
  /** Holders' records of `name` in the store: one per holder (a row, a key, a lease node). */
  holderRecords(name: string): Promise<number>
  /**
   * The expiry the store keeps for the one permit of `name`, ms from the store's own now;
   * or why the store keeps none (the clock test then checks the rest and says so).
   */
  expiry: ((name: string) => Promise<number>) | { none: string }
  /** The renewal-racing-a-release test: each permit's lease (ms) and rounds per process. */
  race: { lease: number; rounds: number }
  /**
   * The connection-reset test: bytes that mark the acquire's request on the wire, and what
   * the acquire answers once the reply is lost ('held': it finds the permits it took;
   * 'failed': it rejects, having given back what it took), with the reason.
   */
  reset: { marker(name: string): string; outcome: 'held' | 'failed'; why: string }
}

export interface StartedStore {
  locks: Locks<unknown>
  worker: Partial<SemaphoreWorkerConfig>
  stop(): Promise<void>
  /** The store's TCP port on 127.0.0.1, and a worker's config that reaches it through `proxyPort` instead. */
  port: number
  via(proxyPort: number): Partial<SemaphoreWorkerConfig>
}

export interface SemaphoreSuite {
  locks(): Locks<unknown>
  store(): StartedStore
  /** The protected resource's redis-server (counts who is inside). */
  resource(): RedisServer
  /** Forks `count` workers on the store, with `config` over the default and `env` added. */
  fork(count: number, config?: Partial<SemaphoreWorkerConfig>, env?: Record<string, string>): Promise<Worker[]>
  ask<T>(worker: Worker, request: SemaphoreWorkerRequest, timeoutMs?: number): Promise<T>
}

export function semaphoreBackendSuite(backend: SemaphoreBackendUnderTest): SemaphoreSuite {
  let store: StartedStore
  let resourceServer: RedisServer
  let workers: Worker[] = []
  const name = (suffix: string) => `${backend.label}-${suffix}`
  const held = (count: number) => (backend.countsHolders ? count : 0)

  beforeAll(async () => {
    ;[store, resourceServer] = await Promise.all([backend.start(), startRedis()])
  })
  afterEach(async () => {
    await Promise.all(workers.map((worker) => worker.stop()))
    workers = []
  })
  afterAll(async () => {
    await store?.locks.close()
    await Promise.all([store?.stop(), resourceServer?.stop()])
  })

  const suite: SemaphoreSuite = {
    locks: () => store.locks,
    store: () => store,
    resource: () => resourceServer,
    async fork(count, overrides = {}, env = {}) {
      const config = { port: 0, resourcePort: resourceServer.port, ...store.worker, ...overrides }
      const started = await forkTwoAtATime(new URL('./worker.ts', import.meta.url), count, {
        ...env,
        SEMAPHORE_WORKER: JSON.stringify(config),
      })
      workers.push(...started)
      return started
    },
    ask: (worker, request, timeoutMs = 60_000) => worker.request(request, timeoutMs),
  }

  it('permits, tokens per permit, FIFO in line, a wait that runs out leaves the line', async () => {
    const fifo = name('fifo')
    const sem = store.locks.semaphore(fifo, { permits: 2 })
    const a = await sem.acquire(1)
    const b = await sem.acquire(1)
    expect(b.token).toBeGreaterThan(a.token)
    expect(await sem.tryAcquire()).toBeUndefined()
    const order: string[] = []
    const big = sem.acquire(2, { wait: '10s' }).then((p) => (order.push('big'), p))
    await until(async () => (await backend.inLine(fifo)) === held(2) + 1, 'big in line')
    const small = sem.acquire(1, { wait: '10s' }).then((p) => (order.push('small'), p))
    await until(async () => (await backend.inLine(fifo)) === held(2) + 2, 'small in line')
    await expect(sem.acquire(1, { wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    await until(async () => (await backend.inLine(fifo)) === held(2) + 2, 'the one that gave up to leave', 3_000)
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
    await until(() => backend.empty(fifo), 'nothing left of the semaphore', 3_000)
  })

  it("a SIGKILLed holder's permits come back within about one lease", async () => {
    const [holder, waiter] = await suite.fork(2)
    const crash = name('crash')
    const { lease, withinMs } = backend.crash
    await suite.ask(holder!, { op: 'acquire', id: 'a', name: crash, permits: 2, count: 2, lease, wait: 0 })
    const next = suite.ask<AcquireReply>(waiter!, {
      op: 'acquire',
      id: 'b',
      name: crash,
      permits: 2,
      count: 1,
      lease,
      wait: 30_000,
    })
    await until(async () => (await backend.inLine(crash)) === held(1) + 1, 'the waiter in line', 30_000)
    const killedAt = performance.now()
    holder!.kill('SIGKILL')
    await next
    const afterMs = performance.now() - killedAt
    expect(afterMs).toBeLessThan(withinMs)
    console.log(
      `[${backend.label} semaphore crash] permits back ${afterMs.toFixed(0)} ms after SIGKILL (lease ${lease} ms)`,
    )
  }, 90_000)

  it('4 processes: never more than N inside, counted by the resource', async () => {
    const contenders = await suite.fork(4)
    const resource = resourceServer.client()
    const fleet = name('fleet')
    const permits = 3
    const { holders, holdMs } = backend.fleet
    const results = await Promise.all(
      contenders.map((worker) =>
        suite.ask<ContendReply>(
          worker,
          { op: 'contend', name: fleet, permits, holders, iterations: 2, lease: 5_000, holdMs },
          170_000,
        ),
      ),
    )
    expect(results.flatMap((r) => r.errors)).toEqual([])
    const max = Number(await resource.get(`${fleet}:max`))
    expect(max).toBeLessThanOrEqual(permits)
    expect(max).toBeGreaterThanOrEqual(2)
    expect(Number(await resource.get(`${fleet}:entries`))).toBe(4 * holders * 2)
    await until(() => backend.empty(fleet), 'nothing left of the semaphore', 5_000)
    resource.disconnect()
    console.log(
      `[${backend.label} semaphore fleet] ${4 * holders * 2} entries, at most ${max} inside at once (permits ${permits})`,
    )
  }, 180_000)

  knownFailureTests(backend, suite)
  return suite
}
