/**
 * Read-write locks on ZooKeeper: Curator's InterProcessReadWriteLock recipe (ephemeral
 * sequential nodes `<uuid>-read-lock-`/`<uuid>-write-lock-` under the name), through the
 * queue-recipe suite.
 */
import type { Client } from 'node-zookeeper-client'
import { createLocks, type ZooKeeperFencedWrites } from '../../../src/lock/index.js'
import { startZooKeeper, zookeeperAvailable, type ZooKeeperEnsemble } from '../../support/zookeeper.js'
import { readWriteQueueSuite } from './queue-suite.js'

const SESSION_MS = 2_000
let server: ZooKeeperEnsemble
let client: Client

/** The children of `path`, none when it does not exist (NO_NODE). */
const childrenOf = (path: string) =>
  new Promise<string[]>((resolve, reject) =>
    client.getChildren(path, (err, children) =>
      err ? ((err as { getCode?: () => number }).getCode?.() === -101 ? resolve([]) : reject(err)) : resolve(children),
    ),
  )

readWriteQueueSuite({
  label: 'zookeeper',
  available: zookeeperAvailable,
  entry: 'node',
  liveness: 'session',
  livenessBound: `session ${SESSION_MS} ms`,
  async start() {
    server = await startZooKeeper()
    client = await server.client({ sessionTimeout: SESSION_MS })
    // Up to 6 Locks at once on this one client, each with two 'expired' listeners (its locks, its read-write line).
    client.setMaxListeners(20)
  },
  stop: async () => server?.stop(),
  newLocks: () => createLocks<ZooKeeperFencedWrites>({ zookeeper: client, namespace: 'rw' }),
  /** The nodes of `name`'s queue, lowest sequence first: `read` / `write`. */
  queued: async (name) =>
    (await childrenOf(`/rw%3Arw/${name}`))
      .sort((a, b) => Number(a.slice(-10)) - Number(b.slice(-10)))
      .map((n) => (/-write-lock-\d{10}$/.test(n) ? 'write' : 'read')),
  workerEnv: () => ({
    LOCK_BACKEND: 'zookeeper',
    ZK_CONNECT: server.connectionString,
    ZK_SESSION_MS: String(SESSION_MS),
  }),
})
