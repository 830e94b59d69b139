/**
 * What waiting costs, counted (the curve is `npm run bench:waiting`): a holder process keeps
 * thousands of cold keys locked while this process waits on them. Its polls stay within
 * `lock.maxPollRate`, the holder's renewals go out in few batched calls, and waits past
 * `maxWaits` are answered by that poll (no subscription, no loader of their own), and
 * waits past `maxPendingWaits` are refused at once, never loaded.
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
  createCache,
  createLocks,
  InvalidArgumentError,
  LockWaitTimeoutError,
  type Cache,
  type CacheOptions,
} from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'
import { countScripts, type ScriptCounts } from '../support/script-calls.js'
import { sleep, until } from '../support/timing.js'
import { forkWorker, type Worker } from '../support/workers.js'

const HOLDER = new URL('../fixtures/lock-holder.ts', import.meta.url)
const KEYS = 3_000
const LEASE_MS = 3_000

describe.skipIf(!redisAvailable)('waiting on many keys held by another process', () => {
  let holder: Worker | undefined
  const caches: Cache[] = []
  const suite = useRedisServer({
    flush: true,
    cleanup: async () => {
      await holder?.stop()
      holder = undefined
      await Promise.all(caches.splice(0).map((cache) => cache.close()))
    },
  })

  async function startHolder(keys: string[]): Promise<Worker> {
    holder = await forkWorker(HOLDER, {
      env: { REDIS_URL: suite.server().url, CACHE_OPTIONS: JSON.stringify({ lock: { lease: LEASE_MS } }) },
    })
    expect(await holder.request<number>({ op: 'hold', keys }, 60_000)).toBe(keys.length)
    return holder
  }

  /** A waiting cache in this process, counting the script calls its client sends. */
  async function waiter(options: Partial<CacheOptions>): Promise<{ cache: Cache; sent: ScriptCounts }> {
    const client = suite.client()
    const sent = countScripts(client)
    const cache = createCache({ redis: client, ttl: '1m', l1: false, waitTimeout: '2m', ...options })
    caches.push(cache)
    await cache.ready()
    return { cache, sent }
  }

  const snapshot = (counts: ScriptCounts, file: string) => ({
    calls: counts[file]?.calls ?? 0,
    keys: counts[file]?.keys ?? 0,
  })

  it('polls stay within maxPollRate, renewals are batched, and waits past maxWaits poll without subscribing', async () => {
    const keys = Array.from({ length: KEYS }, (_, i) => `cold:${i}`)
    const held = await startHolder(keys)
    const MAX_WAITS = 2_000
    const CALLS_PER_SECOND = 5
    const { cache, sent } = await waiter({
      maxWaits: MAX_WAITS,
      lock: { maxPollRate: CALLS_PER_SECOND },
      onWaitTimeout: 'throw',
    })
    const channelsNow = async () => Number(/^pubsub_channels:(\d+)/m.exec(await suite.admin().info('stats'))?.[1])
    const broadcastChannels = await channelsNow() // both caches' own (L1 invalidations, tags)
    let refused = 0
    const calls = keys.map((key) =>
      cache
        .getOrLoad(key, async () => 'loaded-by-the-waiter')
        .catch((error: unknown) => {
          if (error instanceof LockWaitTimeoutError) refused++
          return error
        }),
    )
    await until(() => cache.stats().wait + refused >= KEYS, 'every call to wait or be refused', 60_000)

    // Past the cap the calls still wait (onWaitTimeout 'throw' does not apply), unsubscribed.
    expect(refused).toBe(0)
    expect(cache.stats()['wait-capped']).toBe(KEYS - MAX_WAITS)
    expect(cache.stats().wait).toBe(KEYS)
    expect(cache.stats().timeout).toBe(0) // the cap is not a waitTimeout
    // One subscription per subscribed wait, none for the polled ones.
    expect(await channelsNow()).toBe(broadcastChannels + MAX_WAITS)

    // A fixed window: the waiter's polls, and the holder's renewals.
    await sleep(1_500) // past the burst of first lookups and polls still queued behind them
    const WINDOW_MS = 3_000
    // The window opens with the first count: the holder's answer (a round trip to its process,
    // long on a loaded machine) comes inside it, not before it.
    const startedAt = performance.now()
    const pollsBefore = snapshot(sent, 'poll-locks.lua')
    const lookupsBefore = snapshot(sent, 'get-or-lock.lua')
    const renewalsBefore = snapshot(await held.request<ScriptCounts>({ op: 'sent' }), 'extend-many.lua')
    await sleep(WINDOW_MS)
    const elapsedS = (performance.now() - startedAt) / 1000
    const polls = {
      calls: snapshot(sent, 'poll-locks.lua').calls - pollsBefore.calls,
      keys: snapshot(sent, 'poll-locks.lua').keys - pollsBefore.keys,
    }
    const lookups = snapshot(sent, 'get-or-lock.lua').calls - lookupsBefore.calls
    const renewalsAfter = snapshot(await held.request<ScriptCounts>({ op: 'sent' }), 'extend-many.lua')
    const renewals = {
      calls: renewalsAfter.calls - renewalsBefore.calls,
      keys: renewalsAfter.keys - renewalsBefore.keys,
    }
    console.log(
      `[waiting] ${KEYS} waits (${MAX_WAITS} subscribed) over ${elapsedS.toFixed(1)} s: ${polls.keys} keys polled in ${polls.calls} calls (budget ${CALLS_PER_SECOND} calls/s), ` +
        `${lookups} lookups; holder of ${KEYS} locks: ${renewals.keys} renewals in ${renewals.calls} calls`,
    )

    // Without the scheduler each waiting key polled about once a second (polled ones 4 times): 6,000 calls a
    // second. The budget allows 5 calls a second, plus the 1 saved up at most (elapsedS covers a late window end).
    expect(polls.calls).toBeLessThanOrEqual(CALLS_PER_SECOND * elapsedS + 1 + 1)
    expect(polls.calls).toBeGreaterThan(0) // the safety net still runs
    expect(polls.keys).toBeGreaterThan(polls.calls * 10) // many keys per call
    expect(lookups).toBe(0) // nothing woke a waiter: every lock was still held
    // Every lock is renewed about every lease/3 (1 s): some 9,000 renewals in the window, in
    // calls of up to 500 locks, once per renewal tick. Before: one call per renewal.
    expect(renewals.keys).toBeGreaterThanOrEqual(KEYS)
    expect(renewals.calls).toBeLessThanOrEqual(renewals.keys / 50)

    // The holder's values reach every waiter (by its commit messages, or the poll), none loaded here.
    await held.request({ op: 'release' }, 60_000)
    const answers = await Promise.all(calls)
    const values = answers.filter((answer) => typeof answer === 'string')
    expect(values.length).toBe(KEYS)
    expect(values.every((value) => (value as string).startsWith('held-cold:'))).toBe(true)
    expect(cache.stats().load).toBe(0)
  }, 180_000)

  it("past maxWaits, a wait is answered by the poll: with the default onWaitTimeout 'load', 0 loads here and 0 commits fenced there", async () => {
    const keys = Array.from({ length: KEYS }, (_, i) => `capped:${i}`)
    const held = await startHolder(keys)
    const MAX_WAITS = 100
    const { cache } = await waiter({ maxWaits: MAX_WAITS })
    let loaded = 0
    const calls = keys.map((key) => cache.getOrLoad(key, async () => (loaded++, `own-${key}`)))
    await until(() => cache.stats().wait >= KEYS, 'every call to wait', 60_000)
    expect(cache.stats()['wait-capped']).toBe(KEYS - MAX_WAITS)
    await held.request({ op: 'release' }, 60_000)
    const values = await Promise.all(calls)
    // Every wait answered, each with the holder's value: no loader ran here, none of its commits was fenced.
    expect(values.filter((value, i) => value === `held-${keys[i]}`).length).toBe(KEYS)
    expect(loaded).toBe(0)
    expect(cache.stats().load).toBe(0)
    expect(cache.stats().timeout).toBe(0)
    expect((await held.request<Record<string, number>>({ op: 'stats' })).fenced).toBe(0)
  }, 120_000)

  it('2,000 waits past maxWaits 50 are polled in calls of many keys, within maxPollRate calls/s (INFO commandstats), and all get the holder value', async () => {
    const COUNT = 2_000
    const keys = Array.from({ length: COUNT }, (_, i) => `budget:${i}`)
    const held = await startHolder(keys)
    const CALLS_PER_SECOND = 4
    const { cache, sent } = await waiter({ maxWaits: 50, lock: { maxPollRate: CALLS_PER_SECOND } })
    let loaded = 0
    const answeredAt: number[] = []
    const calls = keys.map((key) =>
      cache.getOrLoad(key, async () => (loaded++, `own-${key}`)).finally(() => answeredAt.push(performance.now())),
    )
    await until(() => cache.stats().wait >= COUNT, 'every call to wait', 60_000)
    expect(cache.stats()['wait-capped']).toBe(COUNT - 50)
    await sleep(1_500) // past the first lookups and the burst of first polls

    // What the server ran, counted by INFO commandstats: script calls (the waiter's polls, the
    // holder's renewals) and the PTTL each poll runs per key.
    const serverCalls = async () => {
      const stats = await suite.admin().info('commandstats')
      const of = (name: string) => Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0)
      return { scripts: of('evalsha') + of('eval'), pttl: of('pttl') }
    }
    const holderScripts = async () =>
      Object.values(await held.request<ScriptCounts>({ op: 'sent' })).reduce((sum, count) => sum + count.calls, 0)
    const serverBefore = await serverCalls()
    const holderBefore = await holderScripts()
    const pollsBefore = snapshot(sent, 'poll-locks.lua')
    const startedAt = performance.now()
    await sleep(3_000)
    const pollsAfter = snapshot(sent, 'poll-locks.lua')
    const holderAfter = await holderScripts()
    const serverAfter = await serverCalls()
    const elapsedS = (performance.now() - startedAt) / 1000
    const waiterScripts = serverAfter.scripts - serverBefore.scripts - (holderAfter - holderBefore)
    const polls = { calls: pollsAfter.calls - pollsBefore.calls, keys: pollsAfter.keys - pollsBefore.keys }
    console.log(
      `[budget] ${COUNT} waits (50 subscribed) over ${elapsedS.toFixed(1)} s: server ran ${waiterScripts} waiter script calls, ` +
        `${serverAfter.pttl - serverBefore.pttl} PTTL; waiter sent ${polls.calls} poll calls of ${polls.keys} keys (budget ${CALLS_PER_SECOND} calls/s)`,
    )
    // The waiter's commands: its poll calls only (no lookups while every lock is held), at most
    // 4 a second plus the one saved up (and one more for a call sent as the window closed).
    // The server counts a call when it runs, the clients when they send it, and the counts are
    // read one after another: a call in flight at either edge of the window (a poll, or a
    // holder's renewal) can fall in one count and not the other, so they agree to within 2.
    expect(Math.abs(waiterScripts - polls.calls)).toBeLessThanOrEqual(2)
    expect(waiterScripts).toBeLessThanOrEqual(CALLS_PER_SECOND * elapsedS + 1 + 1)
    // Each key is polled about once a second (1,950 unsubscribed, 1 s backoff): many keys a call.
    expect(polls.keys).toBeGreaterThanOrEqual(COUNT)
    expect(serverAfter.pttl - serverBefore.pttl).toBeGreaterThanOrEqual(polls.keys)
    expect(polls.keys / polls.calls).toBeGreaterThan(100)

    // Released: every wait answered with the holder's value, none loaded here, none fenced there.
    // Before, the budget counted keys (4 a second here): 1,950 unsubscribed waits took 8 minutes.
    const releasedAt = performance.now()
    await held.request({ op: 'release' }, 60_000)
    const values = await Promise.all(calls)
    expect(values.filter((value, i) => value === `held-${keys[i]}`).length).toBe(COUNT)
    expect(loaded).toBe(0)
    expect(cache.stats().load).toBe(0)
    expect((await held.request<Record<string, number>>({ op: 'stats' })).fenced).toBe(0)
    // Generous (each key is polled about once a second): a bound, not a measurement (bench:waiting).
    expect(Math.max(...answeredAt) - releasedAt).toBeLessThan(30_000)
  }, 180_000)

  it('past maxPendingWaits a call does not wait and never loads: LockWaitTimeoutError, whatever onWaitTimeout says', async () => {
    const keys = ['a', 'b', 'c']
    const held = await startHolder(keys)
    const { cache } = await waiter({ maxPendingWaits: 1, onWaitTimeout: 'load' })
    let loaded = 0
    const calls = keys.map((key) =>
      cache.getOrLoad(key, async () => (loaded++, `own-${key}`)).catch((error: unknown) => error),
    )
    await until(() => cache.stats()['wait-capped'] === 2, 'the two calls past the ceiling to be refused', 10_000)
    expect(cache.stats().wait).toBe(1)
    await held.request({ op: 'release' }, 30_000)
    const answers = await Promise.all(calls)
    const refused = answers.filter((answer) => answer instanceof LockWaitTimeoutError)
    expect(refused.length).toBe(2)
    expect((refused[0] as LockWaitTimeoutError).message).toContain('maxPendingWaits')
    expect(answers.filter((answer) => typeof answer === 'string' && answer.startsWith('held-')).length).toBe(1)
    expect(loaded).toBe(0)
    expect((await held.request<Record<string, number>>({ op: 'stats' })).fenced).toBe(0)
  }, 60_000)
})

describe('the waiting budgets as options', () => {
  const argumentOf = (create: () => unknown): string | undefined => {
    try {
      create()
    } catch (error) {
      if (error instanceof InvalidArgumentError) return error.argument
      throw error
    }
    return undefined
  }

  it('maxWaits, maxPendingWaits, lock.maxPollRate and redis.maxPollRate take positive integers, naming the option otherwise', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, '10']) {
      expect(argumentOf(() => createCache({ ttl: '1s', maxWaits: bad as number }))).toBe('maxWaits')
      expect(argumentOf(() => createCache({ ttl: '1s', maxPendingWaits: bad as number }))).toBe('maxPendingWaits')
      expect(argumentOf(() => createCache({ ttl: '1s', lock: { maxPollRate: bad as number } }))).toBe(
        'lock.maxPollRate',
      )
    }
    const client = new Redis({ lazyConnect: true })
    try {
      expect(argumentOf(() => createLocks({ redis: { client, maxPollRate: 0 } }))).toBe('redis.maxPollRate')
    } finally {
      client.disconnect()
    }
  })
})
