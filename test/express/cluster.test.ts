/**
 * Acceptance 7: coalescing across processes under a burst. 4 worker processes behind one
 * port (node:cluster), 200 autocannon connections on a cold route whose handler takes
 * 200 ms: the handler runs exactly once (counted in Redis), every response is a 200
 * with the same body.
 */
import autocannon from 'autocannon'
import type { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { forkWorker, type Worker } from '../support/workers.js'

const COLD_BODY = JSON.stringify({ product: 7, name: 'Cold widget', stock: 3 })

describe.skipIf(!redisAvailable)('a 4-process cluster under a burst', () => {
  let server: RedisServer
  let redis: Redis
  let primary: Worker | undefined

  beforeAll(async () => {
    server = await startRedis()
    redis = server.client()
    primary = await forkWorker(new URL('./fixtures/cluster-app.ts', import.meta.url), {
      env: { REDIS_URL: server.url, NAMESPACE: 'burst', COLD_BODY },
    })
  })
  afterAll(async () => {
    await primary?.stop()
    await server?.stop()
  })

  it('runs the cold handler exactly once for 200 concurrent connections; all get a 200 with the same body', async () => {
    const port = await primary!.request<number>({ op: 'port' })
    const result = await autocannon({
      url: `http://127.0.0.1:${port}/cold`,
      connections: 200,
      amount: 600, // bounded: 3 requests per connection, the first wave all cold
      timeout: 20,
      expectBody: COLD_BODY,
    })
    expect(result.errors).toBe(0)
    expect(result.timeouts).toBe(0)
    expect(result['2xx']).toBe(600)
    expect(result.non2xx).toBe(0)
    expect(result.mismatches).toBe(0)
    expect(Number(await redis.get('runs:cold'))).toBe(1)
    // The burst really was spread over the 4 processes.
    const perProcess = Object.values(await redis.hgetall('requests-by-pid')).map(Number)
    expect(perProcess).toHaveLength(4)
    expect(perProcess.every((count) => count > 0)).toBe(true)
  })
})
