/**
 * The `withLocks` tests every backend that takes the keys one at a time passes alike
 * (PostgreSQL, MariaDB, etcd, ZooKeeper), registered inside the backend's describe by
 * `multiBackendSuite()`. Across real processes (./worker.ts): callers asking for [a, b]
 * and [b, a] at once never deadlock (every call completes within its wait) and never
 * overlap on a key (counted by the resource, which also refuses a token that does not
 * grow). In this process, against a key held by another process: a timeout and an abort
 * mid-acquisition leave no key of the call in the store (read from the store itself).
 */
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { LockBusyError, type Locks } from '../../../src/index.js'
import { startRedis, type RedisServer } from '../../support/redis.js'
import { until } from '../../support/timing.js'
import type { Worker } from '../../support/workers.js'
import { forkTwoAtATime } from '../semaphore/fork.js'
import type { ContendReply, MultiWorkerConfig, MultiWorkerRequest, MultiWorkerStore } from './protocol.js'

export const MULTI_NAMESPACE = 'ml'

export interface MultiBackendUnderTest {
  /** Log label and key prefix. */
  label: string
  /** Starts the store; resolves the front on it (namespace `MULTI_NAMESPACE`) and how a worker reaches it. */
  start(): Promise<{ locks: Locks<unknown>; store: MultiWorkerStore; stop(): Promise<void> }>
  /** The records of `key` in the store now: its holder and any waiters the store keeps (PostgreSQL: pg_locks rows). */
  entries(key: string): Promise<number>
  /** Rounds per process in the contention test, and how long each call holds its keys (ms). */
  contend: { rounds: number; holdMs: number }
}

export function multiBackendSuite(backend: MultiBackendUnderTest): { locks(): Locks<unknown> } {
  let store: Awaited<ReturnType<MultiBackendUnderTest['start']>>
  let resourceServer: RedisServer
  let workers: Worker[] = []
  const key = (suffix: string) => `${backend.label}-${suffix}`

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

  const fork = async (count: number) => {
    const config: MultiWorkerConfig = {
      store: store.store,
      namespace: MULTI_NAMESPACE,
      resourcePort: resourceServer.port,
    }
    const started = await forkTwoAtATime(new URL('./worker.ts', import.meta.url), count, {
      MULTI_WORKER: JSON.stringify(config),
    })
    workers.push(...started)
    return started
  }
  const ask = <T>(worker: Worker, request: MultiWorkerRequest, timeoutMs = 150_000) =>
    worker.request<T>(request, timeoutMs)

  it('4 processes, two asking for [a, b] and two for [b, a]: no deadlock, never two holders of a key', async () => {
    const [a, b] = [key('a'), key('b')]
    const contenders = await fork(4)
    const { rounds, holdMs } = backend.contend
    const stats = key('contend-stats')
    const replies = await Promise.all(
      contenders.map((worker, i) =>
        ask<ContendReply>(worker, {
          op: 'contend',
          keys: i % 2 ? [b, a] : [a, b],
          rounds,
          holdMs,
          wait: 60_000,
          stats,
        }),
      ),
    )
    const resource = resourceServer.client()
    const counted = await resource.hgetall(stats)
    resource.disconnect()
    // A deadlock would leave calls waiting until their 60 s wait ran out (LockBusyError), or be a database error.
    expect(replies.map((r) => r.errors)).toEqual([{}, {}, {}, {}])
    expect(replies.map((r) => r.rounds)).toEqual([rounds, rounds, rounds, rounds])
    expect(Number(counted.entries)).toBe(4 * rounds * 2) // every call entered with both keys
    expect(Number(counted.overlaps ?? 0)).toBe(0)
    expect(Number(counted.fenced ?? 0)).toBe(0)
    await until(async () => (await backend.entries(a)) + (await backend.entries(b)) === 0, 'both keys free', 10_000)
    console.log(
      `[${backend.label} withLocks] 4 processes x ${rounds} calls ([a, b] x2, [b, a] x2): ${counted.entries} key entries, overlaps ${counted.overlaps ?? 0}, fenced ${counted.fenced ?? 0}, errors 0`,
    )
  }, 180_000)

  it('a wait that runs out on b (held by another process) leaves a and c free in the store', async () => {
    const [a, b, c] = [key('ta'), key('tb'), key('tc')]
    const [blocker] = await fork(1)
    await ask(blocker!, { op: 'hold', key: b })
    expect(await backend.entries(b)).toBe(1)
    let ran = false
    const error = await store.locks.withLocks([c, b, a], () => (ran = true), { wait: 1_500 }).catch((e: unknown) => e)
    // Busy on b, the second key in canonical order: a was taken before the wait ran out.
    expect(error).toBeInstanceOf(LockBusyError)
    expect((error as LockBusyError).key).toBe(b)
    expect(ran).toBe(false)
    const left = { a: await backend.entries(a), b: await backend.entries(b), c: await backend.entries(c) }
    expect(left).toEqual({ a: 0, b: 1, c: 0 }) // b: only the other process's hold
    await ask(blocker!, { op: 'release', key: b })
    await until(async () => (await backend.entries(b)) === 0, 'b free', 10_000)
  }, 90_000)

  it('an abort while holding a and waiting for b rejects with its reason and leaves a and c free in the store', async () => {
    const [a, b, c] = [key('aa'), key('ab'), key('ac')]
    const [blocker] = await fork(1)
    await ask(blocker!, { op: 'hold', key: b })
    const abort = new AbortController()
    let ran = false
    const call = store.locks.withLocks([a, b, c], () => (ran = true), { wait: '60s', signal: abort.signal })
    const settled = call.catch((e: unknown) => e)
    // Mid-acquisition, seen in the store: a held by this call, b held by the other process.
    await until(async () => (await backend.entries(a)) === 1, 'a to be taken', 30_000)
    abort.abort(new Error('caller gave up'))
    const error = await settled
    expect((error as Error).message).toBe('caller gave up')
    expect(ran).toBe(false)
    expect({ a: await backend.entries(a), c: await backend.entries(c) }).toEqual({ a: 0, c: 0 })
    // b: the other process's hold, and no wait of ours. PostgreSQL drops a waiting request
    // once it notices the abandoned connection (client_connection_check_interval, 1 s).
    await until(async () => (await backend.entries(b)) === 1, "only the other process's hold on b", 10_000)
    await ask(blocker!, { op: 'release', key: b })
    // Nothing of the aborted call is in the way: the keys can be taken at once.
    const tokens = await store.locks.withLocks([a, b, c], ({ tokens }) => tokens, { wait: '10s' })
    expect([...tokens.keys()]).toEqual([a, b, c])
  }, 90_000)

  return { locks: () => store.locks }
}
