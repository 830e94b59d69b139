/** `withLocks` on etcd (a FIFO queue of lease-bound keys per key, taken one at a time): the shared multi-key tests. */
import type { Etcd3 } from 'etcd3'
import { describe } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { etcdAvailable, startEtcd } from '../../support/etcd.js'
import { redisAvailable } from '../../support/redis.js'
import { MULTI_NAMESPACE, multiBackendSuite } from './backend-suite.js'

describe.skipIf(!etcdAvailable || !redisAvailable)('locks.withLocks() on etcd', () => {
  let client: Etcd3
  multiBackendSuite({
    label: 'etcd',
    async start() {
      const etcd = await startEtcd()
      client = etcd.client()
      const locks = createLocks({ etcd: client, namespace: MULTI_NAMESPACE })
      return { locks, store: { backend: 'etcd', hosts: etcd.hosts }, stop: () => etcd.stop() }
    },
    // The holder's key and every waiter's, in the key's queue.
    entries: (key) =>
      client
        .getAll()
        .prefix(`${MULTI_NAMESPACE}/${encodeURIComponent(key)}/`)
        .count(),
    contend: { rounds: 15, holdMs: 3 },
  })
})
