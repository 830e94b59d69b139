/** The seeds' coupon test across 4 processes on a real PostgreSQL table, with the ZooKeeper lock (standalone server). */
import { afterAll, beforeAll, describe, it } from 'vitest'
import { postgresAvailable } from '../../support/databases.js'
import { startZooKeeper, zookeeperAvailable, type ZooKeeperEnsemble } from '../../support/zookeeper.js'
import { expectNeverOversold, runCouponContest } from '../../support/coupons/harness.js'

describe.skipIf(!zookeeperAvailable || !postgresAvailable)(
  'coupon contest on ZooKeeper: 1,000 coupons, 1,200 users, 4 processes',
  () => {
    let server: ZooKeeperEnsemble
    beforeAll(async () => {
      server = await startZooKeeper()
    })
    afterAll(async () => {
      await server?.stop()
    })

    it('never oversold, issued == decremented', async () => {
      const result = await runCouponContest({
        kind: 'zookeeper',
        factory: new URL('./coupons-factory.ts', import.meta.url),
        backend: { connectionString: server.connectionString },
      })
      expectNeverOversold(result)
    }, 300_000)
  },
)
