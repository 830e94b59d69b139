/**
 * Attacks on the Redis lock backend's subscribed-wait budget, poll-all-now on subscriber loss,
 * and close(), against a real redis-server: subscriber flapping under 200 waits, aborts during
 * the subscribe and during a pollAllNow, close() with waits pending (twice). Checked: the poll
 * rate budget, no leaked subscription slots (later waits still subscribe), fencing tokens
 * strictly increasing, no unhandled rejections.
 */
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { redisAvailable } from '../../support/redis.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { countScripts } from '../../support/script-calls.js'
import { sleep, until } from '../../support/timing.js'
import { failOnUnhandledRejections } from '../../support/unhandled.js'

describe.skipIf(!redisAvailable)('Redis lock: close, cap and subscriber-loss attacks', () => {
  const suite = useRedisServer({ flush: true })
  failOnUnhandledRejections()

  const keyChannels = async (pattern: string): Promise<number> =>
    ((await suite.admin().pubsub('CHANNELS', pattern)) as string[]).length
  const killSubscribers = async (): Promise<number> =>
    Number(await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub'))

  it('200 waits through 10 subscriber kills in 2 s: poll rate within budget, every waiter gets its lock in token order, slots all returned', async () => {
    const holderClient = suite.client()
    const waiterClient = suite.client()
    const sent = countScripts(waiterClient)
    const MAX_RATE = 3 // poll calls a second
    const holder = createLocks({ redis: holderClient, namespace: 'flap', lease: '30s' })
    const waiter = createLocks({
      redis: { client: waiterClient, maxSubscribedWaits: 50, maxPollRate: MAX_RATE },
      namespace: 'flap',
      wait: '60s',
      lease: '30s',
    })
    const KEYS = 20
    const PER_KEY = 10
    const held = await Promise.all(Array.from({ length: KEYS }, (_, i) => holder.acquire(`k${i}`)))
    const tokens = new Map<string, bigint[]>()
    const waits = Array.from({ length: KEYS * PER_KEY }, (_, n) => {
      const key = `k${n % KEYS}`
      return waiter.acquire(key).then(async (handle) => {
        const list = tokens.get(key) ?? []
        list.push(handle.token)
        tokens.set(key, list)
        await sleep(5)
        await handle.release()
      })
    })
    // 50 waits subscribed, on 20 channels at most.
    await until(async () => (await keyChannels('flap:*')) === KEYS, 'the capped waits to subscribe')
    await sleep(300)
    const polledBefore = sent['poll-locks.lua']?.calls ?? 0
    const startedAt = performance.now()
    let killed = 0
    for (let i = 0; i < 10; i++) {
      killed += await killSubscribers()
      await sleep(200)
    }
    await sleep(500)
    const elapsedS = (performance.now() - startedAt) / 1000
    const polled = (sent['poll-locks.lua']?.calls ?? 0) - polledBefore
    console.log(
      `[flap] killed ${killed} subscriber connections; ${polled} poll calls in ${elapsedS.toFixed(2)} s (budget ${MAX_RATE} calls/s + burst)`,
    )
    expect(killed).toBeGreaterThanOrEqual(5)
    // The budget: maxPollRate calls per second, plus the 1 call saved up at most.
    expect(polled).toBeLessThanOrEqual(Math.ceil(MAX_RATE * elapsedS) + 1 + 1)
    // The subscriber came back and resubscribed.
    await until(async () => (await keyChannels('flap:*')) === KEYS, 'resubscribed after the last kill', 15_000)

    await Promise.all(held.map((handle) => handle.release()))
    await Promise.all(waits)
    for (const [key, list] of tokens) {
      expect(list.length, key).toBe(PER_KEY)
      for (let i = 1; i < list.length; i++)
        expect(list[i]! > list[i - 1]!, `${key} tokens ${list.join(',')}`).toBe(true)
      const first = held[Number(key.slice(1))]!.token
      expect(list[0]! > first).toBe(true)
    }
    await until(async () => (await keyChannels('flap:*')) === 0, 'every subscription to end with its wait')
    // No slot leaked: 50 new waits on 50 held keys take 50 subscriptions again.
    const again = await Promise.all(Array.from({ length: 50 }, (_, i) => holder.acquire(`n${i}`)))
    const later = again.map((_, i) => waiter.acquire(`n${i}`))
    await until(async () => (await keyChannels('flap:{l:n*')) === 50, '50 new waits to subscribe', 15_000)
    await Promise.all(again.map((handle) => handle.release()))
    await Promise.all((await Promise.all(later)).map((handle) => handle.release()))
    await Promise.all([holder.close(), waiter.close()])
  }, 90_000)

  it('waits aborted during their subscribe, or while the subscriber is killed, give their slots back', async () => {
    const holder = createLocks({ redis: suite.client(), namespace: 'ab', lease: '30s' })
    const waiterClient = suite.client()
    const waiter = createLocks({ redis: { client: waiterClient, maxSubscribedWaits: 3 }, namespace: 'ab', wait: '30s' })
    const held = await Promise.all(Array.from({ length: 6 }, (_, i) => holder.acquire(`k${i}`)))
    for (let round = 0; round < 5; round++) {
      const controllers = Array.from({ length: 6 }, () => new AbortController())
      const calls = Promise.allSettled(
        controllers.map((controller, i) => waiter.acquire(`k${i}`, { signal: controller.signal })),
      )
      // Abort some at once (mid-subscribe), the rest once the subscriber is killed (mid pollAllNow).
      controllers.slice(0, 3).forEach((controller) => controller.abort(new Error('caller gave up')))
      await sleep(20)
      if (round > 0) await killSubscribers()
      controllers.slice(3).forEach((controller) => controller.abort(new Error('caller gave up')))
      const settled = await calls
      for (const result of settled) expect(result.status).toBe('rejected')
    }
    await until(async () => (await keyChannels('ab:*')) === 0, 'aborted waits to unsubscribe', 15_000)
    // Three slots are free: three new waits subscribe.
    const later = [0, 1, 2].map((i) => waiter.acquire(`k${i}`))
    await until(async () => (await keyChannels('ab:*')) === 3, '3 new waits to subscribe', 15_000)
    await Promise.all(held.map((handle) => handle.release()))
    const got = await Promise.all(later)
    got.forEach((handle, i) => expect(handle.token > held[i]!.token).toBe(true))
    await Promise.all(got.map((handle) => handle.release()))
    await Promise.all([holder.close(), waiter.close()])
  }, 60_000)

  it('close() with waits pending, called twice, racing a release: the waits end, no one else takes a held lock', async () => {
    const holder = createLocks({ redis: suite.client(), namespace: 'cl', lease: '30s' })
    const waiter = createLocks({ redis: suite.client(), namespace: 'cl', wait: '30s' })
    const held = await Promise.all(Array.from({ length: 10 }, (_, i) => holder.acquire(`k${i}`)))
    const calls = held.map((_, i) => waiter.acquire(`k${i}`))
    const settling = Promise.allSettled(calls) // handled now: they reject during close()
    await until(async () => (await keyChannels('cl:*')) === 10, 'the waits to subscribe')
    const startedAt = performance.now()
    // Half the locks are released as close() runs: those waiters may win, the rest must not.
    const releases = held.slice(0, 5).map((handle) => handle.release())
    const closes = [waiter.close(), waiter.close()]
    await Promise.all(closes)
    await Promise.all(releases)
    const settled = await settling
    const closeMs = performance.now() - startedAt
    console.log(
      `[close] ${settled.filter((r) => r.status === 'fulfilled').length} of 10 waits won, close() x2 took ${closeMs.toFixed(0)} ms`,
    )
    expect(closeMs).toBeLessThan(5_000)
    settled.slice(5).forEach((result) => expect(result.status).toBe('rejected'))
    // The held half still holds: the waiter took none of them.
    for (const handle of held.slice(5)) expect(await suite.admin().pttl(`cl:{l:${handle.key}}:lock`)).toBeGreaterThan(0)
    await until(async () => (await keyChannels('cl:*')) === 0, 'the closed waiter to unsubscribe')
    await Promise.all(held.slice(5).map((handle) => handle.release()))
    await holder.close()
  }, 30_000)

  it('a standalone client does not retry a timed-out acquire within its wait: one attempt, the typed error', async () => {
    const client = suite.client()
    const sent = countScripts(client)
    const locks = createLocks({ redis: client, namespace: 'sa', wait: '10s', commandTimeout: '200ms' })
    await (await locks.acquire('warm')).release() // scripts loaded, connection ready
    const before = sent['acquire.lua']?.calls ?? 0
    await suite.admin().call('CLIENT', 'PAUSE', '1500', 'ALL')
    const startedAt = performance.now()
    const error = await locks.acquire('k').catch((caught: unknown) => caught)
    const tookMs = performance.now() - startedAt
    expect((error as Error).name).toBe('RedisUnavailableError')
    expect(sent['acquire.lua']?.calls ?? 0).toBe(before + 1)
    expect(tookMs).toBeLessThan(1_400) // one 200 ms timeout, not the 10 s wait
    await sleep(1_600) // the pause ends; the abandoned attempt is released behind itself
    await until(
      async () => (await suite.admin().exists('sa:{l:k}:lock')) === 0,
      'no lock left by the abandoned attempt',
    )
    await locks.close()
  }, 20_000)

  it('releases published while the subscriber flaps still wake 100 subscribed waits well before their 5 s sleep', async () => {
    const holder = createLocks({ redis: suite.client(), namespace: 'lost', lease: '30s' })
    const waiter = createLocks({ redis: suite.client(), namespace: 'lost', wait: '30s', lease: '30s' })
    const KEYS = 100
    const held = await Promise.all(Array.from({ length: KEYS }, (_, i) => holder.acquire(`k${i}`)))
    const releasedAt: number[] = []
    const waits = held.map((_, i) =>
      waiter.acquire(`k${i}`).then((handle) => ({ handle, ms: performance.now() - releasedAt[i]! })),
    )
    await until(async () => (await keyChannels('lost:*')) === KEYS, 'every wait to subscribe')
    let killed = 0
    for (let i = 0; i < 10; i++) {
      killed += await killSubscribers()
      // Release a tenth of the locks right after each kill: their messages fall in the gap.
      for (let k = i * 10; k < i * 10 + 10; k++) releasedAt[k] = performance.now()
      await Promise.all(held.slice(i * 10, i * 10 + 10).map((handle) => handle.release()))
      await sleep(200)
    }
    const acquired = await Promise.all(waits)
    const slowest = Math.max(...acquired.map(({ ms }) => ms))
    console.log(
      `[lost] ${killed} kills; the slowest of ${KEYS} waiters had its lock ${slowest.toFixed(0)} ms after its own release`,
    )
    acquired.forEach(({ handle }, i) => expect(handle.token > held[i]!.token).toBe(true))
    // Without the poll-all-now on loss, a waiter whose message was lost sleeps up to 5 s past its release.
    expect(slowest).toBeLessThan(2_500)
    await Promise.all(acquired.map(({ handle }) => handle.release()))
    await until(async () => (await keyChannels('lost:*')) === 0, 'the subscriptions to end')
    await Promise.all([holder.close(), waiter.close()])
  }, 60_000)
})
