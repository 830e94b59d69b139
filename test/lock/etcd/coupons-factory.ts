/** Coupon contest factory: the etcd lock. Config: `{ hosts }`, client URLs of etcd members the test started. */
import { Etcd3 } from 'etcd3'
import { createLocks } from '../../../src/index.js'

export default async function etcdLocks(config: { hosts: string[] }) {
  const client = new Etcd3({ hosts: config.hosts })
  const locks = createLocks({ etcd: client, namespace: 'coupons' })
  return {
    locks,
    async close() {
      await locks.close()
      client.close()
    },
  }
}
