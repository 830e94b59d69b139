/**
 * The ZooKeeper backend against a real standalone server, in this process and in child
 * processes: FIFO hand-off, holder crash, paused holder, a disconnection that recovers
 * (not a loss) and a silent partition (the session expires: the signal aborts first).
 */
import net from 'node:net'
import type { Client } from 'node-zookeeper-client'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { InvalidArgumentError } from '../../../src/errors.js'
import { createLocks, type Locks, type ZooKeeperFencedWrites } from '../../../src/lock/index.js'
import { until } from '../../support/timing.js'
import { forkWorker, type Worker } from '../../support/workers.js'
import {
  connectZooKeeper,
  startZooKeeper,
  zookeeperAvailable,
  type ZooKeeperEnsemble,
} from '../../support/zookeeper.js'
import {
  expectBusyThenHandOff,
  handOffAfterCrash,
  pausedHolderIsFenced,
  queueInOrder,
} from '../../support/etcd-zookeeper-scenarios.js'

const WORKER = new URL('../../support/etcd-zookeeper-worker.ts', import.meta.url)
const SESSION_MS = 1_000

const zk = <T>(run: (cb: (err: unknown, value: T) => void) => void) =>
  new Promise<T>((resolve, reject) => run((err, value) => (err ? reject(err) : resolve(value))))

describe.skipIf(!zookeeperAvailable)('ZooKeeper lock backend (standalone server)', () => {
  let server: ZooKeeperEnsemble
  let client: Client
  let locks: Locks<ZooKeeperFencedWrites>
  let workers: Worker[] = []
  let keyCount = 0
  const freshKey = () => `zk-test.${process.pid}.${++keyCount}`
  const lockPath = (key: string) => `/sg-lock/${encodeURIComponent(key).replace(/\./g, '%2E')}`
  const queueLength = async (key: string) =>
    (await zk<string[]>((cb) => client.getChildren(lockPath(key), cb)).catch(() => [])).length
  const spawn = async (count: number) => {
    const env = { LOCK_BACKEND: 'zookeeper', ZK_CONNECT: server.connectionString, ZK_SESSION_MS: String(SESSION_MS) }
    const forked = await Promise.all(Array.from({ length: count }, () => forkWorker(WORKER, { env })))
    workers.push(...forked)
    return forked
  }

  beforeAll(async () => {
    server = await startZooKeeper()
    client = await server.client({ sessionTimeout: 2_000 })
    locks = createLocks<ZooKeeperFencedWrites>({ zookeeper: client })
  })
  afterAll(async () => {
    await locks?.close()
    await server?.stop()
  })
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop()))
    workers = []
  })

  it('takes a free lock, reports a held one busy, hands it over with a greater token, and leaves no path behind', async () => {
    const key = freshKey()
    await expectBusyThenHandOff(locks, key, queueLength)
    await until(
      async () => !(await zk<unknown>((cb) => client.exists(lockPath(key), cb))),
      "the key's path to be removed",
    )
  })

  it('FIFO: 10 waiters get the lock in the order they queued, with increasing tokens', async () => {
    const clients: Client[] = []
    const newLocks = async () => {
      const own = await server.client()
      clients.push(own)
      return createLocks({ zookeeper: own })
    }
    try {
      await queueInOrder(locks, newLocks, freshKey(), 10, queueLength)
    } finally {
      for (const own of clients) own.close()
    }
  })

  it('owner-checked setData applies while held and is refused after release', async () => {
    const key = freshKey()
    const data = `/${key}-data`
    await zk((cb) => client.create(data, Buffer.from('none'), cb))
    const held = await locks.acquire(key)
    await expect(held.resource.setData(data, Buffer.from('in'))).resolves.toBe(true)
    await held.release()
    await expect(held.resource.setData(data, Buffer.from('late'))).resolves.toBe(false)
    expect((await zk<Buffer>((cb) => client.getData(data, cb))).toString()).toBe('in')
  })

  it('a SIGKILLed holder is followed by the next holder within about one session timeout', async () => {
    const [holder, waiter] = await spawn(2)
    const handOffMs = await handOffAfterCrash(holder!, waiter!, freshKey(), queueLength)
    console.log(
      `[zookeeper] hand-off after SIGKILL of the holder: ${handOffMs.toFixed(0)} ms (session timeout ${SESSION_MS} ms)`,
    )
    expect(handOffMs).toBeLessThan(4 * SESSION_MS)
  })

  it('a paused holder: its session expires, its signal aborts, its late owner-checked write is refused, the next token is greater', async () => {
    const key = freshKey()
    const data = `/${key}-data`
    await zk((cb) => client.create(data, Buffer.from('none'), cb))
    const [paused, next] = await spawn(2)
    await pausedHolderIsFenced(paused!, next!, key, data, queueLength, async () => {
      // Its client learns of the expiry when it reconnects; a write sent meanwhile fails
      // with CONNECTION_LOSS (outcome unknown: a LockBackendError), so write once it knows.
      await until(
        async () => (await paused!.request<{ sessionExpired: boolean }>({ op: 'status' })).sessionExpired,
        'the paused client to learn its session expired',
      )
    })
    expect((await zk<Buffer>((cb) => client.getData(data, cb))).toString()).toBe('next holder')
  })

  it('a disconnection that recovers within the session is not a loss; a silent partition aborts the signal before the next holder gets in', async () => {
    const proxy = await startProxy(Number(server.connectionString.split(':')[1]))
    const viaProxy = await connectZooKeeper(`127.0.0.1:${proxy.port}`, { sessionTimeout: SESSION_MS, spinDelay: 50 })
    const proxied = createLocks({ zookeeper: viaProxy })
    try {
      const key = freshKey()
      const held = await proxied.acquire(key)
      let reconnects = 0
      viaProxy.on('connected', () => reconnects++)
      proxy.drop() // every connection reset: the client reconnects to the same session
      await until(() => reconnects >= 1, 'the client to reconnect')
      // Two session timeouts later the lock is still held: the session survived.
      await new Promise((resolve) => setTimeout(resolve, 2 * SESSION_MS))
      expect(held.signal.aborted).toBe(false)
      await expect(locks.tryAcquire(key)).resolves.toBeUndefined()

      let abortedAt: number | undefined
      held.signal.addEventListener('abort', () => (abortedAt = performance.now()), { once: true })
      proxy.blackhole() // nothing passes, nobody is told: only the server knows the session ends
      const next = await locks.acquire(key, { wait: '10s' })
      const nextAt = performance.now()
      expect(abortedAt).toBeDefined()
      expect(abortedAt!).toBeLessThanOrEqual(nextAt)
      expect(next.token).toBeGreaterThan(held.token)
      await next.release()
    } finally {
      await proxied.close().catch(() => {})
      viaProxy.close()
      await proxy.close()
    }
  })

  it('rejects a value that is not a ZooKeeper client', () => {
    let error: unknown
    try {
      createLocks({ zookeeper: {} as never })
    } catch (err) {
      error = err
    }
    expect(error).toBeInstanceOf(InvalidArgumentError)
    expect((error as InvalidArgumentError).argument).toBe('zookeeper')
  })
})

/** A loopback TCP proxy that can reset every connection (`drop`) or silently stop forwarding (`blackhole`). */
async function startProxy(targetPort: number) {
  let holed = false
  const sockets = new Set<net.Socket>()
  const server = net.createServer((downstream) => {
    const upstream = net.connect({ host: '127.0.0.1', port: targetPort })
    for (const s of [downstream, upstream]) {
      sockets.add(s)
      s.on('error', () => {}).on('close', () => {
        sockets.delete(s)
        downstream.destroy()
        upstream.destroy()
      })
    }
    downstream.on('data', (chunk) => holed || upstream.write(chunk))
    upstream.on('data', (chunk) => holed || downstream.write(chunk))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    drop: () => {
      for (const s of sockets) s.destroy()
    },
    blackhole: () => {
      holed = true
    },
    close: () => {
      for (const s of sockets) s.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
