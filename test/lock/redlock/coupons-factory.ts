/** Coupon contest factory: Redlock. Config: `{ ports }` of the independent redis-servers the test started. */
import { Redis } from 'ioredis'
import { createLocks } from '../../../src/index.js'

export default async function redlockLocks(config: { ports: number[] }) {
  const nodes = config.ports.map((port) => new Redis({ host: '127.0.0.1', port }))
  const locks = createLocks({ redlock: nodes, namespace: 'coupons' })
  return {
    locks,
    async close() {
      await locks.close()
      for (const node of nodes) node.disconnect()
    },
  }
}
