import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisPerTest } from '../support/redis-suite.js'
import { until } from '../support/timing.js'

/** Issue 10 item 1: an abandoned lookup must not leave a lock nobody owns. */
describe.skipIf(!redisAvailable)('an abandoned get-or-lock', () => {
  const caches: Cache[] = []
  const perTest = useRedisPerTest(() => Promise.all(caches.splice(0).map((cache) => cache.close())))

  it('Redis stopped, the lookup times out, Redis is killed and restarted: the replayed script leaves no lock', async () => {
    const server = await perTest.start()
    const admin = server.client({ retryStrategy: () => 50 })
    admin.on('error', () => {})
    const client: Redis = server.client({ retryStrategy: () => 50 })
    client.on('error', () => {})
    await client.ping()
    server.pause() // SIGSTOP: the connection stays open, nothing answers
    // Created now, the cache cannot measure the server clock, so its first lookup is the
    // get-or-lock script itself (not the fresh GET): it is sent, and times out.
    const a = createCache({ redis: client, ttl: '10m', redisTimeout: 300, lock: { lease: '5s' } })
    caches.push(a)
    let loads = 0
    expect(await a.getOrLoad('k', async () => (loads++, 'loaded while Redis hung'))).toBe('loaded while Redis hung')
    expect(loads).toBe(1)
    await server.kill() // SIGKILL; ioredis resends the unanswered script to the new server
    await server.restart()
    await until(() => client.status === 'ready', 'the client to reconnect', 20_000)
    await client.ping() // behind whatever the client replayed
    expect(await admin.pttl('sg:{k:k}:lock')).toBe(-2) // no lock (it was taken, for nobody, before the fix)

    const b = createCache({ redis: server.client(), ttl: '10m', redisTimeout: 300, lock: { lease: '5s' } })
    caches.push(b)
    let waits = 0
    b.on('wait', () => waits++)
    // a may have stored its value meanwhile (a hit), else b loads: either way at once.
    expect(['loaded while Redis hung', 'v-b']).toContain(await b.getOrLoad('k', async () => (loads++, 'v-b')))
    expect(waits).toBe(0) // the next caller waits on nobody
    admin.disconnect()
  })
})
