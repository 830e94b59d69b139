/**
 * Coupon contest factory: the Redis lock. Config: `{ port }` of a redis-server the test
 * started, or `{ cluster: startupNodes }`, or `{ sentinels, name }`; optional
 * `waitForReplicas` and `namespace`.
 */
import { Cluster, Redis } from 'ioredis'
import { createLocks } from '../../../src/index.js'

type Nodes = { host: string; port: number }[]
export interface RedisFactoryConfig {
  port?: number
  cluster?: Nodes
  sentinels?: Nodes
  name?: string
  waitForReplicas?: { replicas?: number; timeout?: number }
  namespace?: string
}

export default async function redisLocks(config: RedisFactoryConfig) {
  const client = config.cluster
    ? new Cluster(config.cluster)
    : config.sentinels
      ? new Redis({ sentinels: config.sentinels, name: config.name })
      : new Redis({ host: '127.0.0.1', port: config.port })
  client.on('error', () => {}) // failovers: commands report the outage
  // As an app starts serving once connected: a Cluster client's first command waits for the
  // slot map, which on a loaded machine can take longer than the backend's command timeout.
  if (config.cluster || config.sentinels) {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('redis client not ready within 30 s')), 30_000)
      client.once('ready', () => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
  const locks = createLocks({
    redis: { client, waitForReplicas: config.waitForReplicas },
    namespace: config.namespace ?? 'coupons',
  })
  return {
    locks,
    async close() {
      await locks.close()
      client.disconnect()
    },
  }
}
