/** Coupon contest factory: the ZooKeeper lock. Config: `{ connectionString }` of a ZooKeeper server the test started. */
import { createLocks } from '../../../src/index.js'
import { connectZooKeeper } from '../../support/zookeeper.js'

export default async function zookeeperLocks(config: { connectionString: string }) {
  const client = await connectZooKeeper(config.connectionString)
  const locks = createLocks({ zookeeper: client, namespace: 'coupons' })
  return {
    locks,
    async close() {
      await locks.close()
      client.close()
    },
  }
}
