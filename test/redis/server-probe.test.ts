import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { majorVersion } from '../../src/redis/server-probe.js'
import { redisAvailable, startRedis, stopAllRedis, type RedisServer } from '../support/redis.js'
import { gate, until } from '../support/timing.js'

const commandCalls = async (server: RedisServer, command: string) =>
  Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(await server.client().info('commandstats'))?.[1] ?? 0)

describe('server version', () => {
  it('reads the major version from INFO server (Redis 6.2 stays on classic pub/sub)', () => {
    expect(majorVersion('# Server\r\nredis_version:7.0.15\r\nredis_mode:cluster\r\n')).toBe(7)
    expect(majorVersion('# Server\r\nredis_version:6.2.14\r\n')).toBe(6)
    expect(majorVersion('no version here')).toBeUndefined()
  })
})

describe.skipIf(!redisAvailable)('what the cache reads from the server at start-up', () => {
  let server: RedisServer
  beforeAll(async () => {
    server = await startRedis()
  })
  afterAll(stopAllRedis)

  it('a standalone client stays on classic PUBLISH by default', async () => {
    await server.client().config('RESETSTAT')
    const [leader, waiter] = [
      createCache({ redis: server.client(), ttl: '30s' }),
      createCache({ redis: server.client(), ttl: '30s' }),
    ]
    const held = gate()
    const first = leader.getOrLoad('k', async () => {
      await held.promise
      return 'v'
    })
    await until(() => leader.stats().leader === 1, 'the leader to lock')
    const second = waiter.getOrLoad('k', async () => 'not me')
    await until(() => waiter.stats().wait === 1, 'the waiter to wait')
    held.open()
    expect(await Promise.all([first, second])).toEqual(['v', 'v'])
    expect(await commandCalls(server, 'publish')).toBeGreaterThan(0)
    expect(await commandCalls(server, 'spublish')).toBe(0)
    await Promise.all([leader.close(), waiter.close()])
  })

  it('warns once with a config-warning when maxmemory-policy can evict our keys, and not under noeviction', async () => {
    const evicting = await startRedis({ args: ['--maxmemory-policy', 'volatile-lru'] })
    const warnings: string[] = []
    const cache = createCache({ redis: evicting.client(), ttl: '30s' })
    cache.on('config-warning', ({ setting, value }) => warnings.push(`${setting}=${value}`))
    await until(() => warnings.length > 0, 'the config warning')
    expect(warnings).toEqual(['maxmemory-policy=volatile-lru'])
    expect(cache.stats()['config-warning']).toBe(1)

    await server.client().config('RESETSTAT')
    const quiet = createCache({ redis: server.client(), ttl: '30s' })
    await until(async () => (await commandCalls(server, 'config\\|get')) >= 1, 'the policy to be read')
    await quiet.getOrLoad('k2', async () => 'v') // one more round trip after the CONFIG reply
    expect(quiet.stats()['config-warning']).toBe(0)
    await Promise.all([cache.close(), quiet.close()])
  })

  it('createCache neither blocks nor fails on a Cluster that cannot be reached; calls are answered without Redis', async () => {
    const nobody = await startRedis()
    const port = nobody.port
    await nobody.stop() // a port we own, with nothing listening
    const client = new Cluster([{ host: '127.0.0.1', port }], { clusterRetryStrategy: () => 200 })
    client.on('error', () => {})
    const started = performance.now()
    const cache = createCache({ redis: client, ttl: '30s', redisTimeout: 200, redisFailoverWait: 0 })
    expect(performance.now() - started).toBeLessThan(100)
    expect(await cache.getOrLoad('k', async () => 'loaded without Redis')).toBe('loaded without Redis')
    await cache.close()
    client.disconnect()
  })
})
