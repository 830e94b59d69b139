/**
 * bench:lock contenders for the consensus backends (issue 13): one etcd member and one
 * standalone ZooKeeper server, started by the bench (the test support's launchers: free
 * loopback ports, data under /dev/shm, stopped by pid). Each is skipped with a reason
 * when its server is not installed.
 */
import { Etcd3 } from 'etcd3'
import type { Client } from 'node-zookeeper-client'
import { createLocks } from '../../src/index.js'
import { etcdAvailable, startEtcd, type EtcdCluster } from '../../test/support/etcd.js'
import {
  connectZooKeeper,
  startZooKeeper,
  zookeeperAvailable,
  type ZooKeeperEnsemble,
} from '../../test/support/zookeeper.js'
import { fromLocks, type BenchContender, type BenchEnv } from './contender.js'

export const CONSENSUS_BENCH_CONTENDERS: BenchContender[] = [
  {
    name: 'stampede-guard etcd',
    describe:
      'createLocks({ etcd }): lease + txn put, lowest create_revision holds, predecessor watch, revoke on release (1 member)',
    unavailable: (env) => (env.etcdHosts ? undefined : 'etcd is not installed'),
    async create(env) {
      const client = new Etcd3({ hosts: env.etcdHosts! })
      return fromLocks(createLocks({ etcd: client, namespace: 'bench-etcd' }), () => client.close())
    },
  },
  {
    name: 'stampede-guard zookeeper',
    describe:
      'createLocks({ zookeeper }): ephemeral sequential node, predecessor watch, delete on release (standalone)',
    unavailable: (env) => (env.zookeeper ? undefined : 'ZooKeeper is not installed'),
    async create(env) {
      const client: Client = await connectZooKeeper(env.zookeeper!, { sessionTimeout: 10_000 })
      return fromLocks(createLocks({ zookeeper: client, namespace: 'bench-zk' }), () => client.close())
    },
  },
]

/** Starts the servers the contenders above need (those installed); `env` goes to the bench and, as `waiterEnv`, to its waiter process. */
export async function startConsensusServers(): Promise<{
  env: Partial<BenchEnv>
  waiterEnv: Record<string, string>
  stop(): Promise<void>
}> {
  const [etcd, zookeeper]: [EtcdCluster | undefined, ZooKeeperEnsemble | undefined] = await Promise.all([
    etcdAvailable ? startEtcd() : undefined,
    zookeeperAvailable ? startZooKeeper() : undefined,
  ])
  const env: Partial<BenchEnv> = { etcdHosts: etcd?.hosts, zookeeper: zookeeper?.connectionString }
  return {
    env,
    waiterEnv: {
      ...(etcd ? { BENCH_ETCD_HOSTS: etcd.hosts.join(',') } : {}),
      ...(zookeeper ? { BENCH_ZK_CONNECT: zookeeper.connectionString } : {}),
    },
    async stop() {
      await Promise.all([etcd?.stop(), zookeeper?.stop()])
    },
  }
}

/** The waiter process's side of `waiterEnv`. */
export function consensusEnvFromProcess(): Partial<BenchEnv> {
  return { etcdHosts: process.env.BENCH_ETCD_HOSTS?.split(','), zookeeper: process.env.BENCH_ZK_CONNECT }
}
