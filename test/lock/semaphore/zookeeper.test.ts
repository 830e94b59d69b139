/**
 * The ZooKeeper semaphore (Curator's InterProcessSemaphoreV2 recipe): acquirers queue on a
 * lock of their own, the head creates its ephemeral sequential lease node and waits on a
 * child watch until the counts fit. The shared semaphore tests (./backend-suite.ts), and
 * its own known failures: a session expiry loses the permits (the signal aborts, the
 * release reports them lost, another process gets them with a greater token), and an
 * abort while waiting leaves nothing behind, in the line or among the leases.
 */
import type { Client, Exception } from 'node-zookeeper-client'
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { nodeName, rootPath } from '../../../src/lock/zookeeper/backend.js'
import { until } from '../../support/timing.js'
import { startZooKeeper, zookeeperAvailable } from '../../support/zookeeper.js'
import { semaphoreBackendSuite } from './backend-suite.js'
import type { AcquireReply, ReleaseReply } from './protocol.js'

const SESSION_MS = 1_000
const NO_NODE = -101

describe.skipIf(!zookeeperAvailable)('locks.semaphore() on ZooKeeper', () => {
  let client: Client
  const children = (path: string) =>
    new Promise<string[]>((resolve, reject) =>
      client.getChildren(path, (error, names) =>
        error ? ((error as Exception).getCode?.() === NO_NODE ? resolve([]) : reject(error)) : resolve(names),
      ),
    )
  const inLine = async (name: string) => (await children(`${rootPath('sem:semaphore-line')}/${nodeName(name)}`)).length
  const leases = async (name: string) => (await children(`${rootPath('sem:semaphore')}/${nodeName(name)}`)).length
  const suite = semaphoreBackendSuite({
    label: 'zk',
    async start() {
      const server = await startZooKeeper()
      client = await server.client({ sessionTimeout: 2_000 })
      const locks = createLocks({ zookeeper: client, namespace: 'sem' })
      return {
        locks,
        worker: { zookeeper: { connect: server.connectionString, sessionMs: SESSION_MS } },
        stop: () => server.stop(),
        port: server.servers[0]!.clientPort,
        via: (proxyPort) => ({ zookeeper: { connect: `127.0.0.1:${proxyPort}`, sessionMs: SESSION_MS } }),
      }
    },
    inLine,
    countsHolders: false,
    empty: async (name) => (await inLine(name)) === 0 && (await leases(name)) === 0,
    crash: { lease: SESSION_MS, withinMs: 4 * SESSION_MS }, // session-bound: the worker's session timeout
    fleet: { holders: 10, holdMs: 30 }, // entering is a queue of round trips: hold long enough to overlap
    holderRecords: leases,
    expiry: {
      none: 'a permit is an ephemeral node bound to its holder session; the server expires the session by its own ticks since the last heartbeat, and stores no expiry time',
    },
    race: { lease: SESSION_MS, rounds: 40 }, // a renewal is a read of the lease node: it can recreate nothing
    reset: {
      marker: () => '-lease-',
      outcome: 'held',
      why: 'the lease node is created in protected mode (a uuid in its name): after the reset the acquire finds the node it created, in the same session',
    },
  })

  it('a session expiry loses the permits: the signal aborts, the release reports them lost, another gets them with a greater token', async () => {
    const [paused] = await suite.fork(1)
    const name = 'zk-expired'
    const first = await suite.ask<AcquireReply>(paused!, {
      op: 'acquire',
      id: 'a',
      name,
      permits: 1,
      count: 1,
      lease: SESSION_MS,
      wait: 0,
    })
    paused!.kill('SIGSTOP') // no heartbeats: the server expires its session and deletes its lease node
    let next
    try {
      next = await suite.locks().semaphore(name, { permits: 1 }).acquire(1, { wait: '20s' })
    } finally {
      paused!.kill('SIGCONT')
    }
    expect(next.token).toBeGreaterThan(BigInt(first.tokens[0]!))
    await until(
      async () => (await suite.ask<{ aborted: boolean }>(paused!, { op: 'state', id: 'a' })).aborted,
      'the paused holder to learn its permits are lost',
      20_000,
    )
    const released = await suite.ask<ReleaseReply>(paused!, { op: 'release', id: 'a' })
    expect(released).toMatchObject({ released: false, error: 'LockLostError' })
    expect(await leases(name)).toBe(1) // the new holder's, untouched
    await next.release()
  }, 60_000)

  it('an abort while waiting, in line or at its head, leaves nothing behind', async () => {
    const name = 'zk-abort'
    const sem = suite.locks().semaphore(name, { permits: 1 })
    const holder = await sem.acquire(1)
    const head = new AbortController()
    const behind = new AbortController()
    const atHead = sem.acquire(1, { wait: '20s', signal: head.signal })
    await until(async () => (await leases(name)) === 2, 'the head to create its lease node and wait')
    const inLineToo = sem.acquire(1, { wait: '20s', signal: behind.signal })
    await until(async () => (await inLine(name)) === 2, 'the second waiter in line')
    behind.abort(new Error('gave up in line'))
    await expect(inLineToo).rejects.toThrow('gave up in line')
    head.abort(new Error('gave up at the head'))
    await expect(atHead).rejects.toThrow('gave up at the head')
    await until(async () => (await inLine(name)) === 0 && (await leases(name)) === 1, 'only the holder left')
    await holder.release()
    const again = await sem.tryAcquire()
    expect(again).toBeDefined() // nothing left blocks the semaphore
    await again!.release()
  }, 60_000)
})
