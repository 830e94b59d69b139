/**
 * Read-write locks on etcd: the `rwmutex` recipe (sequential keys `read-`/`write-` under the
 * name, each on its own lease), through the queue-recipe suite.
 */
import type { Etcd3 } from 'etcd3'
import { createLocks, type EtcdFencedWrites } from '../../../src/lock/index.js'
import { etcdAvailable, startEtcd, type EtcdCluster } from '../../support/etcd.js'
import { readWriteQueueSuite } from './queue-suite.js'

let etcd: EtcdCluster
let client: Etcd3

readWriteQueueSuite({
  label: 'etcd',
  available: etcdAvailable,
  entry: 'key',
  liveness: 'lease',
  livenessBound: 'TTL 1 s',
  async start() {
    etcd = await startEtcd()
    client = etcd.client()
  },
  stop: async () => etcd?.stop(),
  newLocks: () => createLocks<EtcdFencedWrites>({ etcd: etcd.client(), namespace: 'rw', lease: '1s' }),
  /** The keys of `name`'s queue, oldest first: `read-…` / `write-…`. */
  queued: async (name) =>
    (await client.getAll().prefix(`rw/%rw/${name}/`).sort('Create', 'Ascend').keys()).map((k) =>
      k.slice(`rw/%rw/${name}/`.length).replace(/-.*/, ''),
    ),
  workerEnv: () => ({ LOCK_BACKEND: 'etcd', ETCD_HOSTS: etcd.hosts.join(',') }),
})
