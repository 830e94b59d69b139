/**
 * The etcd semaphore: counts in lease-bound keys, one FIFO line by create_revision. The
 * shared semaphore tests (./backend-suite.ts), and its own known failure: a revoked lease
 * (as an expiry during a partition would end it) reported lost at release.
 */
import type { Etcd3 } from 'etcd3'
import { describe, expect, it } from 'vitest'
import { createLocks, LockLostError } from '../../../src/index.js'
import { etcdAvailable, startEtcd } from '../../support/etcd.js'
import { redisAvailable } from '../../support/redis.js'
import { until } from '../../support/timing.js'
import { semaphoreBackendSuite } from './backend-suite.js'

describe.skipIf(!etcdAvailable || !redisAvailable)('locks.semaphore() on etcd', () => {
  let client: Etcd3
  const keys = async (name: string) => (await client.getAll().prefix(`sem/${name}/s/`).keys()).length
  const suite = semaphoreBackendSuite({
    label: 'etcd',
    async start() {
      const etcd = await startEtcd()
      client = etcd.client()
      const locks = createLocks({ etcd: client, namespace: 'sem' })
      return {
        locks,
        worker: { etcdHosts: etcd.hosts },
        stop: () => etcd.stop(),
        port: etcd.members[0]!.clientPort,
        via: (proxyPort) => ({ etcdHosts: [`http://127.0.0.1:${proxyPort}`] }),
      }
    },
    inLine: keys,
    countsHolders: true,
    empty: async (name) => (await keys(name)) === 0,
    crash: { lease: 2_000, withinMs: 2_000 + 3_000 }, // the lease TTL, whole seconds, counted from the last keep-alive
    fleet: { holders: 10, holdMs: 3 },
    holderRecords: keys,
    expiry: async (name) => {
      // The key's lease: its TTL is the server's count (whole seconds), no client time in it.
      const [kv] = (await client.getAll().prefix(`sem/${name}/s/`).exec()).kvs
      const { TTL } = await client.leaseClient.leaseTimeToLive({ ID: kv!.lease })
      return Number(TTL) * 1_000
    },
    race: { lease: 1_000, rounds: 60 }, // leases are whole seconds
    reset: {
      marker: (name) => `${name}/s/`,
      outcome: 'held',
      why: "the etcd client resends the put; the key named after the attempt's own lease is found as its own",
    },
  })

  it('a permit whose lease was revoked is lost: signal aborts, validForMs 0, release rejects with LockLostError', async () => {
    const sem = suite.locks().semaphore('e-lost', { permits: 1 })
    const held = await sem.acquire(1, { lease: '1s' })
    // Revoke its lease from outside, as an expiry during a partition would end it.
    const [kv] = (await client.getAll().prefix('sem/e-lost/s/').exec()).kvs
    await client.leaseClient.leaseRevoke({ ID: kv!.lease })
    await until(() => held.signal.aborted, 'the keep-alive to find the lease gone', 5_000)
    expect(held.validForMs).toBe(0)
    await expect(held.release()).rejects.toBeInstanceOf(LockLostError)
  })
})
