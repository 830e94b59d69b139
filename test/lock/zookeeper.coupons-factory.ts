/** Coupon contest factory: the ZooKeeper lock. Config: `{ connectionString }` of a ZooKeeper server the test started. */
import zookeeper from 'node-zookeeper-client'
import { createLocks } from '../../src/index.js'

export default async function zookeeperLocks(config: { connectionString: string }) {
  const client = zookeeper.createClient(config.connectionString, { sessionTimeout: 2_000, spinDelay: 100, retries: 0 })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ZooKeeper client did not connect to ${config.connectionString} within 10 s`)), 10_000)
    client.once('connected', () => {
      clearTimeout(timer)
      resolve()
    })
    client.connect()
  })
  const locks = createLocks({ zookeeper: client, namespace: 'coupons' })
  return {
    locks,
    async close() {
      await locks.close()
      client.close()
    },
  }
}
