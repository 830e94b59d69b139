/** The seeds' coupon test across 4 processes on a real PostgreSQL table, with the etcd lock (one member). */
import { afterAll, beforeAll, describe, it } from 'vitest'
import { postgresAvailable } from '../../support/databases.js'
import { etcdAvailable, startEtcd, type EtcdCluster } from '../../support/etcd.js'
import { expectNeverOversold, runCouponContest } from '../../support/coupons/harness.js'

describe.skipIf(!etcdAvailable || !postgresAvailable)(
  'coupon contest on etcd: 1,000 coupons, 1,200 users, 4 processes',
  () => {
    let etcd: EtcdCluster
    beforeAll(async () => {
      etcd = await startEtcd()
    })
    afterAll(async () => {
      await etcd?.stop()
    })

    it('never oversold, issued == decremented', async () => {
      const result = await runCouponContest({
        kind: 'etcd',
        factory: new URL('./coupons-factory.ts', import.meta.url),
        backend: { hosts: etcd.hosts },
      })
      expectNeverOversold(result)
    }, 300_000)
  },
)
