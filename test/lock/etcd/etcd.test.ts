/**
 * The etcd backend against one real etcd member, in this process and in child processes:
 * FIFO hand-off with one watch event per release, holder crash, paused holder, give-up.
 */
import type { Etcd3 } from 'etcd3'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { InvalidArgumentError, LockBackendError, LockBusyError } from '../../../src/errors.js'
import { createLocks, type EtcdFencedWrites, type Locks } from '../../../src/lock/index.js'
import { etcdAvailable, startEtcd, type EtcdCluster } from '../../support/etcd.js'
import { until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'
import {
  expectBusyThenHandOff,
  handOffAfterCrash,
  pausedHolderIsFenced,
  queueInOrder,
} from '../../support/etcd-zookeeper-scenarios.js'

const WORKER = new URL('../../support/etcd-zookeeper-worker.ts', import.meta.url)

describe.skipIf(!etcdAvailable)('etcd lock backend (one member)', () => {
  let etcd: EtcdCluster
  let client: Etcd3
  let locks: Locks<EtcdFencedWrites>
  let workers: Worker[] = []
  let keyCount = 0
  const freshKey = () => `etcd-test/${process.pid}/${++keyCount}`
  const queueLength = (key: string) =>
    client
      .getAll()
      .prefix(`sg-lock/${encodeURIComponent(key)}/`)
      .count()
  const spawn = async (count: number) => {
    const forked = await Promise.all(
      Array.from({ length: count }, () =>
        forkWorker(WORKER, { env: { LOCK_BACKEND: 'etcd', ETCD_HOSTS: etcd.hosts.join(',') } }),
      ),
    )
    workers.push(...forked)
    return forked
  }

  beforeAll(async () => {
    etcd = await startEtcd()
    client = etcd.client()
    locks = createLocks<EtcdFencedWrites>({ etcd: client, lease: '1s' })
  })
  afterAll(async () => {
    await locks?.close()
    await etcd?.stop()
  })
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop()))
    workers = []
  })

  it('takes a free lock, reports a held one busy, and hands it over with a greater token', async () => {
    const key = freshKey()
    await expectBusyThenHandOff(locks, key, queueLength)
    await until(async () => (await queueLength(key)) === 0, 'every lock key to be gone')
  })

  it('a waiter that gives up deletes its key: the queue holds only the holder again', async () => {
    const key = freshKey()
    const holder = await locks.acquire(key)
    await expect(locks.acquire(key, { wait: 300 })).rejects.toBeInstanceOf(LockBusyError)
    await until(async () => (await queueLength(key)) === 1, 'the waiter to delete its key and revoke its lease')
    await holder.release()
  })

  it('a waiter whose own key vanished while it waited fails on wake-up instead of taking the lock (etcd-io/etcd#11456)', async () => {
    const key = freshKey()
    const holder = await locks.acquire(key)
    const waiting = locks.acquire(key, { wait: '10s' }).catch((err: unknown) => err)
    await until(async () => (await queueLength(key)) === 2, 'the waiter to queue')
    // What an expired lease does to the waiter's key, without waiting a TTL for it.
    const { kvs } = await client
      .getAll()
      .prefix(`sg-lock/${encodeURIComponent(key)}/`)
      .sort('Create', 'Descend')
      .limit(1)
      .exec()
    await client.delete().key(kvs[0]!.key)
    await holder.release()
    const error = await waiting
    expect(error).toBeInstanceOf(LockBackendError)
    expect((error as Error).message).toMatch(/own lock key is gone/)
  })

  it('owner-checked writes commit while held and are refused after release', async () => {
    const key = freshKey()
    const held = await locks.acquire(key)
    await expect(held.resource.put(`${key}/data`, 'in')).resolves.toBe(true)
    await held.release()
    await expect(held.resource.put(`${key}/data`, 'late')).resolves.toBe(false)
    expect(await client.get(`${key}/data`).string()).toBe('in')
  })

  it('FIFO: 20 waiters get the lock in the order they queued, and each release sends one watch event', async () => {
    const member = etcd.members[0]!
    let eventsBefore = 0
    await queueInOrder(
      locks,
      async () => createLocks({ etcd: client }),
      freshKey(),
      20,
      queueLength,
      async () => {
        eventsBefore = await member.metric('etcd_debugging_mvcc_events_total')
      },
    )
    const eventsAfter = await member.metric('etcd_debugging_mvcc_events_total')
    // 21 releases; all but the last one's wake exactly one watcher. A prefix watch (a
    // herd) would send every release and every queued put to every waiter instead.
    expect(eventsAfter - eventsBefore).toBe(20)
  })

  it('a SIGKILLed holder is followed by the next holder within about one lease', async () => {
    const [holder, waiter] = await spawn(2)
    const handOffMs = await handOffAfterCrash(holder!, waiter!, freshKey(), queueLength)
    console.log(`[etcd] hand-off after SIGKILL of the holder: ${handOffMs.toFixed(0)} ms (lease 1 s)`)
    // etcd expires leases on the leader's 500 ms sweep: one lease plus that, generously.
    expect(handOffMs).toBeLessThan(4_000)
  })

  it('a paused holder: its signal aborts, its late owner-checked write is refused, the next token is greater', async () => {
    const key = freshKey()
    const [paused, next] = await spawn(2)
    await pausedHolderIsFenced(paused!, next!, key, `${key}/data`, queueLength)
    expect(await client.get(`${key}/data`).string()).toBe('next holder')
  })

  it('works through a namespaced client (keys under its prefix, hand-off included)', async () => {
    const tenant = createLocks({ etcd: client.namespace('tenant-a/') })
    const key = freshKey()
    const first = await tenant.acquire(key)
    const second = tenant.acquire(key, { wait: '10s' })
    await until(
      async () =>
        (await client
          .getAll()
          .prefix(`tenant-a/sg-lock/${encodeURIComponent(key)}/`)
          .count()) === 2,
      'the waiter to queue under the namespace',
    )
    const member = etcd.members[0]!
    const eventsBefore = await member.metric('etcd_debugging_mvcc_events_total')
    await first.release()
    const next = await second
    // Woken by its watch (one event), not by the safety-net poll.
    expect((await member.metric('etcd_debugging_mvcc_events_total')) - eventsBefore).toBe(1)
    expect(next.token).toBeGreaterThan(first.token)
    await next.release()
    await tenant.close()
  })

  it('rejects a value that is not an etcd3 client', () => {
    expect(() => createLocks({ etcd: {} as never })).toThrow(InvalidArgumentError)
    try {
      createLocks({ etcd: { lease: 1 } as never })
    } catch (err) {
      expect((err as InvalidArgumentError).argument).toBe('etcd')
    }
  })

  it('an unreachable etcd fails with LockBackendError within the command timeout, never hangs', async () => {
    const dead = etcd.client({ hosts: ['http://127.0.0.1:1'] } as never)
    const deadLocks = createLocks({ etcd: dead, commandTimeout: 300 })
    const startedAt = performance.now()
    await expect(deadLocks.acquire(freshKey(), { wait: '2s' })).rejects.toBeInstanceOf(LockBackendError)
    expect(performance.now() - startedAt).toBeLessThan(2_000)
    await deadLocks.close()
  })
})
