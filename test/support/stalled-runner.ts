/**
 * The set-up of the tests that stall one instance's traffic to Redis (test/lock/run-once-keepalive):
 * Locks whose client goes through a proxy (test/support/blackhole-proxy.ts) that can hold
 * its bytes, and an ordinary Locks beside it on the same server. Everything is closed after
 * each test. Call useStalledRunner() inside the file's describe.
 */
import { Redis } from 'ioredis'
import { afterEach } from 'vitest'
import { createLocks, type Locks } from '../../src/lock/index.js'
import { startBlackholeProxy, type BlackholeProxy } from './blackhole-proxy.js'
import type { RedisSuite } from './redis-suite.js'

export interface StalledRunner {
  /** Holds and forwards the runner's traffic. */
  proxy: BlackholeProxy
  /** Locks through the proxy, commandTimeout 250 ms (a stalled renewal times out and is retried). */
  runner: Locks
  /** Locks on the server directly. */
  other: Locks
}

export function useStalledRunner(
  redis: RedisSuite,
): (namespace: string, lease: string, warmUp: (locks: Locks) => Promise<unknown>) => Promise<StalledRunner> {
  const opened: Locks[] = []
  const proxies: BlackholeProxy[] = []
  const clients: Redis[] = []
  afterEach(async () => {
    for (const proxy of proxies) proxy.resume()
    await Promise.all(opened.splice(0).map((l) => l.close()))
    for (const client of clients.splice(0)) client.disconnect()
    await Promise.all(proxies.splice(0).map((p) => p.close()))
  })
  return async (namespace, lease, warmUp) => {
    const proxy = await startBlackholeProxy(redis.server().port)
    proxies.push(proxy)
    const through = new Redis({ port: proxy.port, host: '127.0.0.1', maxRetriesPerRequest: null })
    clients.push(through)
    const runner = createLocks({ redis: through, namespace, lease, commandTimeout: '250ms' })
    const other = createLocks({ redis: redis.server().client(), namespace, lease })
    const warm = createLocks({ redis: through, namespace: `${namespace}-warm-up`, lease })
    opened.push(runner, other, warm)
    // Connected, and every script loaded, before any stall: a script Redis does not know yet
    // needs its NOSCRIPT answer first, which a stall holds back.
    await warmUp(warm)
    return { proxy, runner, other }
  }
}
