import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createCache } from '../../src/index.js'
import { parseInfo, redisAvailable, startRedis, stopAllRedis, type RedisServer } from '../support/redis.js'
import { until } from '../support/timing.js'

const waitCalls = async (server: RedisServer) =>
  Number(/^cmdstat_wait:calls=(\d+)/m.exec(await server.client().info('commandstats'))?.[1] ?? 0)

describe.skipIf(!redisAvailable)('lock.waitForReplicas', () => {
  let primary: RedisServer
  let replica: RedisServer
  beforeAll(async () => {
    primary = await startRedis()
    replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(primary.port)] })
    await until(
      async () => parseInfo(await replica.client().info('replication')).master_link_status === 'up',
      'the replica to sync',
    )
  })
  afterAll(stopAllRedis)

  it('the loader runs only once the replica has the lock: WAIT in the same round trip as the lookup', async () => {
    await primary.client().config('RESETSTAT')
    const cache = createCache({
      redis: primary.client(),
      ttl: '30s',
      namespace: 'durable',
      lock: { waitForReplicas: { replicas: 1, timeout: '2s' } },
    })
    const unreplicated: number[] = []
    cache.on('lock-unreplicated', ({ acknowledged }) => unreplicated.push(acknowledged))
    const onReplica = replica.client()
    let lockSeenOnReplica: string | null = null
    const value = await cache.getOrLoad('k', async () => {
      lockSeenOnReplica = await onReplica.get('durable:{k:k}:lock')
      return 'v'
    })
    expect(value).toBe('v')
    expect(lockSeenOnReplica).toMatch(/^[0-9a-f]{24}[0-9a-z]+:\d+$/) // <owner: 96 random bits + a counter>:<token>
    expect(unreplicated).toEqual([])
    expect(await waitCalls(primary)).toBe(1)
    await cache.close()
  })

  it('a replica that does not acknowledge in time: the lock is used all the same, and reported (lock-unreplicated)', async () => {
    const cache = createCache({
      redis: primary.client(),
      ttl: '30s',
      namespace: 'lagging',
      lock: { waitForReplicas: { timeout: 50 } },
    })
    const unreplicated: { acknowledged: number; wanted: number }[] = []
    cache.on('lock-unreplicated', ({ acknowledged, wanted }) => unreplicated.push({ acknowledged, wanted }))
    replica.pause()
    try {
      expect(await cache.getOrLoad('k', async () => 'v')).toBe('v')
    } finally {
      replica.resume()
    }
    expect(unreplicated).toEqual([{ acknowledged: 0, wanted: 1 }])
    await cache.close()
  })

  it('rejects bad settings with the option named', () => {
    const redis = primary.client()
    expect(() => createCache({ redis, ttl: '30s', lock: { waitForReplicas: { replicas: 0 } } })).toThrow(
      expect.objectContaining({ argument: 'lock.waitForReplicas.replicas' }),
    )
    expect(() => createCache({ redis, ttl: '30s', lock: { waitForReplicas: { timeout: 'soon' } } })).toThrow(
      expect.objectContaining({ argument: 'lock.waitForReplicas.timeout' }),
    )
    expect(() => createCache({ redis, ttl: '30s', lock: { waitForReplicas: { replica: 1 } as never } })).toThrow(
      expect.objectContaining({ argument: 'lock.waitForReplicas.replica' }),
    )
  })

  it('is off by default: no WAIT is sent', async () => {
    await primary.client().config('RESETSTAT')
    const cache = createCache({ redis: primary.client(), ttl: '30s', namespace: 'plain' })
    expect(await cache.getOrLoad('k', async () => 'v')).toBe('v')
    expect(await waitCalls(primary)).toBe(0)
    await cache.close()
  })
})
