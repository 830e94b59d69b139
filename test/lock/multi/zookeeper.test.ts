/** `withLocks` on ZooKeeper (ephemeral sequential nodes per key, taken one at a time): the shared multi-key tests. */
import type { Client, Exception } from 'node-zookeeper-client'
import { describe } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { isLockNode, nodeName, rootPath } from '../../../src/lock/zookeeper/backend.js'
import { redisAvailable } from '../../support/redis.js'
import { startZooKeeper, zookeeperAvailable } from '../../support/zookeeper.js'
import { MULTI_NAMESPACE, multiBackendSuite } from './backend-suite.js'

const NO_NODE = -101

describe.skipIf(!zookeeperAvailable || !redisAvailable)('locks.withLocks() on ZooKeeper', () => {
  let client: Client
  multiBackendSuite({
    label: 'zk',
    async start() {
      const server = await startZooKeeper()
      client = await server.client({ sessionTimeout: 2_000 })
      const locks = createLocks({ zookeeper: client, namespace: MULTI_NAMESPACE })
      return {
        locks,
        store: { backend: 'zookeeper', connect: server.connectionString, sessionMs: 2_000 },
        stop: () => server.stop(),
      }
    },
    // The holder's node and every waiter's, under the key.
    entries: (key) =>
      new Promise<number>((resolve, reject) =>
        client.getChildren(`${rootPath(MULTI_NAMESPACE)}/${nodeName(key)}`, (error, names) =>
          error
            ? (error as Exception).getCode?.() === NO_NODE
              ? resolve(0)
              : reject(error)
            : resolve(names.filter(isLockNode).length),
        ),
      ),
    contend: { rounds: 15, holdMs: 3 },
  })
})
