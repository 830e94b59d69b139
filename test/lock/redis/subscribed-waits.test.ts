/**
 * `redis.maxSubscribedWaits`: the Redis lock backend's pub/sub subscriptions are budgeted.
 * Waits past the budget do not subscribe and are not refused: the shared poll wakes them,
 * and they still give up at their deadline. Counted on the server (PUBSUB, CLIENT LIST).
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createLocks, InvalidArgumentError, LockBusyError } from '../../../src/index.js'
import { redisAvailable } from '../../support/redis.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { countScripts } from '../../support/script-calls.js'
import { sleep, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('Redis lock: maxSubscribedWaits', () => {
  const suite = useRedisServer()

  const keyChannels = async (): Promise<number> =>
    ((await suite.admin().pubsub('CHANNELS', 'cap:*')) as string[]).length
  /** Channel subscriptions of every client on the server (`sub=` in CLIENT LIST). */
  const subscriptions = async (): Promise<number> =>
    ((await suite.admin().client('LIST')) as string)
      .split('\n')
      .map((line) => Number(/ sub=(\d+)/.exec(line)?.[1] ?? 0))
      .reduce((a, b) => a + b, 0)

  it('20 waits on 20 held keys with maxSubscribedWaits 5: 5 subscriptions, and every waiter gets its lock before its deadline', async () => {
    const holderClient = suite.client()
    const waiterClient = suite.client()
    const sent = countScripts(waiterClient)
    const holder = createLocks({ redis: holderClient, namespace: 'cap', lease: '5s' })
    const waiter = createLocks({
      redis: { client: waiterClient, maxSubscribedWaits: 5 },
      namespace: 'cap',
      wait: '20s',
    })
    const KEYS = 20
    const held = await Promise.all(Array.from({ length: KEYS + 1 }, (_, i) => holder.acquire(`k${i}`)))
    const waits = Array.from({ length: KEYS }, (_, i) =>
      waiter.acquire(`k${i}`).then((handle) => ({ handle, at: performance.now() })),
    )
    // 20 first attempts, and the 5 subscribed waits try again once subscribed.
    await until(
      () => (sent['acquire.lua']?.calls ?? 0) >= KEYS + 5,
      'every waiter to try (and the subscribed ones again)',
    )
    await until(async () => (await keyChannels()) >= 5, '5 key channels subscribed')
    const polledBefore = sent['poll-locks.lua']?.keys ?? 0
    await sleep(1_000)
    const polled = (sent['poll-locks.lua']?.keys ?? 0) - polledBefore
    const [channels, subscribed] = [await keyChannels(), await subscriptions()]
    console.log(
      `[maxSubscribedWaits 5] ${KEYS} waits: ${channels} key channels, ${subscribed} subscriptions server-wide, ${polled} keys polled in 1 s`,
    )
    expect(channels).toBe(5)
    expect(subscribed).toBe(5) // no fixed channel on a lock backend: nothing else subscribes
    // The 15 poll-only waits poll at least every 250 ms (4/s each); the 5 subscribed ones not at all while the lock is held.
    expect(polled).toBeGreaterThanOrEqual(15 * 2)
    expect(polled).toBeLessThanOrEqual(15 * 25)

    // A poll-only wait still gives up at its deadline.
    const startedAt = performance.now()
    await expect(waiter.acquire(`k${KEYS}`, { wait: '300ms' })).rejects.toBeInstanceOf(LockBusyError)
    const gaveUpMs = performance.now() - startedAt
    expect(gaveUpMs).toBeGreaterThanOrEqual(250)
    expect(gaveUpMs).toBeLessThan(3_000)
    expect(await keyChannels()).toBe(5)

    const releasedAt = performance.now()
    await Promise.all(held.map((handle) => handle.release()))
    const acquired = await Promise.all(waits) // a LockBusyError here would be a wait past its 20 s deadline
    const slowestMs = Math.max(...acquired.map(({ at }) => at - releasedAt))
    console.log(
      `[maxSubscribedWaits 5] all ${KEYS} released: the slowest waiter had its lock ${slowestMs.toFixed(0)} ms later`,
    )
    expect(acquired.every(({ handle }, i) => handle.token > held[i]!.token)).toBe(true)
    expect(slowestMs).toBeLessThan(10_000)
    await Promise.all(acquired.map(({ handle }) => handle.release()))
    await until(async () => (await keyChannels()) === 0, 'the subscriptions to end with their waits')

    // The slots are free again: a new wait subscribes.
    const again = await holder.acquire('k0')
    const next = waiter.acquire('k0')
    await until(async () => (await keyChannels()) === 1, 'a new wait to subscribe')
    await again.release()
    await (await next).release()
    await Promise.all([holder.close(), waiter.close()])
  }, 60_000)

  it('maxSubscribedWaits takes a positive integer, naming the option otherwise', () => {
    const client = new Redis({ lazyConnect: true })
    try {
      for (const bad of [0, -1, 1.5, Number.NaN, '10']) {
        let error: unknown
        try {
          createLocks({ redis: { client, maxSubscribedWaits: bad as number } })
        } catch (caught) {
          error = caught
        }
        expect(error).toBeInstanceOf(InvalidArgumentError)
        expect((error as InvalidArgumentError).argument).toBe('redis.maxSubscribedWaits')
      }
      createLocks({ redis: { client, maxSubscribedWaits: 1 } })
    } finally {
      client.disconnect()
    }
  })
})
