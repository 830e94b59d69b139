import type { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { createCache, type Cache, type CacheOptions } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'
import { gate, until } from '../support/timing.js'
import { cacheParts } from '../../src/cache/cache.js'

/** Losing only the subscriber connection (issue 10, items 4 and 8). */
describe.skipIf(!redisAvailable)('subscriber connection lost', () => {
  const suite = useCacheSuite()
  const mine: Cache[] = []
  const clients: Redis[] = []
  afterEach(async () => {
    await Promise.all(mine.splice(0).map((cache) => cache.close()))
    for (const client of clients.splice(0)) client.disconnect()
  })

  /** A cache whose connections (the subscriber is a duplicate) reconnect only after `reconnectMs`: a long, known gap. */
  function slowReconnecting(reconnectMs: number, options: Partial<CacheOptions> = {}): Cache {
    const client = suite.server().client({ retryStrategy: () => reconnectMs })
    client.on('error', () => {})
    clients.push(client)
    const cache = createCache({ redis: client, ttl: '10m', ...options })
    mine.push(cache)
    return cache
  }

  const subscriberOf = (cache: Cache) =>
    (cacheParts(cache).core.notifier as unknown as { subscriber?: Redis }).subscriber
  const subscriberDown = (cache: Cache) => subscriberOf(cache) !== undefined && subscriberOf(cache)!.status !== 'ready'

  async function scriptCalls(): Promise<number> {
    const info = await suite.admin().info('commandstats')
    let calls = 0
    for (const match of info.matchAll(/cmdstat_(?:eval|evalsha):calls=(\d+)/g)) calls += Number(match[1])
    return calls
  }

  it('waiters that queue while their subscriber reconnects poll instead of loading: one load', async () => {
    const lock = { pollInterval: 50, maxPollInterval: 200 }
    const leader = suite.cache({ ttl: '10m', lock })
    const waiters = Array.from({ length: 4 }, () => slowReconnecting(3_000, { lock }))
    await Promise.all([leader, ...waiters].map((cache) => cache.ready()))
    let loads = 0
    const slow = gate()
    const led = leader.getOrLoad('k', async () => (loads++, await slow.promise, 'v1'))
    await until(() => loads === 1, 'the leader to start loading')

    const killed = (await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')) as number
    expect(killed).toBeGreaterThanOrEqual(5)
    await until(() => waiters.every(subscriberDown), 'the waiters to see their subscriber connection drop')
    let waiting = 0
    for (const cache of waiters) cache.on('wait', () => waiting++)
    const before = await scriptCalls()
    const answers = Promise.all(waiters.map((cache) => cache.getOrLoad('k', async () => (loads++, 'own load'))))
    // Each waiter's lookup, its re-check after subscribing and at least one poll, unless they loaded.
    await until(
      async () => loads > 1 || (waiting === 4 && (await scriptCalls()) >= before + 3 * 4),
      'the waiters to queue and poll',
    )
    expect(waiters.every(subscriberDown)).toBe(true) // still in the gap: the waits were polls
    slow.open()
    expect(await led).toBe('v1')
    expect(await answers).toEqual(['v1', 'v1', 'v1', 'v1'])
    expect(loads).toBe(1)
  })

  it('a value over the notice threshold is announced without its data, and waiters read it with one GET', async () => {
    const leader = suite.cache()
    const waiter = suite.cache({ lock: { pollInterval: '10s', maxPollInterval: '10s' } }) // any answer within the test is the message's
    await Promise.all([leader.ready(), waiter.ready()])
    const listener = suite.client()
    const messages: Buffer[] = []
    listener.on('messageBuffer', (_channel: Buffer, message: Buffer) => messages.push(message))
    await listener.subscribe('sg:{k:big}:ch')
    const big = 'x'.repeat(100 * 1024)
    let loads = 0
    const slow = gate()
    const led = leader.getOrLoad('big', async () => (loads++, await slow.promise, big))
    await until(() => loads === 1, 'the leader to start loading')
    let waited = false
    waiter.on('wait', () => (waited = true))
    const answer = waiter.getOrLoadResult('big', async () => (loads++, 'own load'))
    await until(
      async () => waited && ((await suite.admin().pubsub('NUMSUB', 'sg:{k:big}:ch')) as [string, number])[1] === 2,
      'the waiter to subscribe',
    )
    slow.open()
    expect(await led).toBe(big)
    expect(await answer).toEqual({ value: big, outcome: 'coalesced' })
    expect(loads).toBe(1)
    await until(() => messages.length === 1, 'the commit notice')
    expect(messages[0]!.toString()).toMatch(/^n\|\d+$/)
  })

  it('a delete missed while the subscriber reconnects is not served from L1 afterwards (issue 10 item 8)', async () => {
    const a = suite.cache({ ttl: '10m' })
    const b = slowReconnecting(1_000)
    await Promise.all([a.ready(), b.ready()])
    expect(await a.getOrLoad('k', async () => 'v1')).toBe('v1')
    let l1Hits = 0
    b.on('hit', ({ tier }) => tier === 'l1' && l1Hits++)
    expect(await b.getOrLoad('k', async () => 'unused')).toBe('v1')
    expect(await b.getOrLoad('k', async () => 'unused')).toBe('v1')
    expect(l1Hits).toBe(1) // b holds k in L1
    await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await until(() => subscriberDown(b), "b's subscriber connection to drop")
    await a.delete('k') // its broadcast reaches no one: b is not subscribed
    await until(() => subscriberOf(b)?.status === 'ready', "b's subscriber to reconnect")
    let reloads = 0
    expect(await b.getOrLoad('k', async () => (reloads++, 'v2'))).toBe('v2')
    expect(reloads).toBe(1)
    expect(await a.getOrLoad('k', async () => 'unused')).toBe('v2')
  })

  it('while Redis cannot be asked, an L1 entry held when the subscriber dropped still serves', async () => {
    const b = slowReconnecting(3_000, { redisTimeout: 200 })
    await b.ready()
    expect(await b.getOrLoad('k', async () => 'v1')).toBe('v1')
    await suite.admin().flushall() // had b asked Redis, it would load again
    await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes') // b's command connection (not the admin's)
    await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await until(() => subscriberDown(b) && clients[0]!.status !== 'ready', "b's connections to drop")
    let loads = 0
    let failures = 0
    b.on('redis-error', ({ operation }) => operation !== 'subscriber' && failures++)
    expect(await b.getOrLoad('k', async () => (loads++, 'own load'))).toBe('v1')
    expect(loads).toBe(0)
    expect(failures).toBeGreaterThanOrEqual(1) // it did ask Redis, which could not answer
  })
})
