import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { sleep } from '../support/timing.js'

describe.skipIf(!redisAvailable)('grace refreshes obey delete() and set() (issue 10, item 9)', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedis()
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('a delete that lands while a grace refresh commits does not let the refreshed value back into L1', async () => {
    const [ra, rb] = [server.client(), server.client()]
    const a = createCache({ redis: ra, ttl: 200, staleTtl: '30s', namespace: 'gd' })
    const b = createCache({ redis: rb, ttl: 200, staleTtl: '30s', namespace: 'gd' })
    await a.getOrLoad('k', async () => 'v0')
    await sleep(300) // in grace in Redis; b has nothing in L1
    let deleting: Promise<unknown> | undefined
    b.on('load', () => {
      // The refresh's commit has just been sent: the delete goes out behind it.
      queueMicrotask(() => {
        deleting = b.delete('k')
      })
    })
    expect(await b.getOrLoadResult('k', async () => 'v1')).toEqual({ value: 'v0', outcome: 'stale' }) // b won the refresh
    for (let i = 0; i < 200 && !deleting; i++) await sleep(10)
    await deleting
    await sleep(50) // the commit's reply has arrived
    expect(await b.getOrLoadResult('k', async () => 'after-delete')).toEqual({
      value: 'after-delete',
      outcome: 'loaded',
    })
    await Promise.all([a.close(), b.close()])
    ra.disconnect()
    rb.disconnect()
  })
})
