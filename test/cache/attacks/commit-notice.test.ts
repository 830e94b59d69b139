/**
 * Attacks on the commit notice of a large value ('n|now': the waiter reads the fresh copy with
 * one GET). A notice whose value is not there when the waiter reads (deleted, expired, or a
 * forged notice), and one whose fresh copy is corrupt in Redis: the waiter must not serve
 * nothing or garbage, must not load while the holder still holds the lock, and still gets the
 * holder's value once it commits. Counted: the waiter's loads, its GETs of the fresh copy,
 * corrupt events.
 */
import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../../src/index.js'
import { entryKeys } from '../../../src/cache/redis/keys.js'
import { redisAvailable } from '../../support/redis.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { scriptFiles, scriptOf } from '../../support/script-calls.js'
import { gate, until } from '../../support/timing.js'

const NS = 'notice-attack'

/** Counts the GETs of `key` that `client` sends, and the replies to its lookups (get-or-lock scripts). */
function countGets(client: Redis, key: string): { gets: number; scriptReplies: number } {
  const counted = { gets: 0, scriptReplies: 0 }
  const files = scriptFiles()
  const send = client.sendCommand.bind(client)
  client.sendCommand = ((command: { name: string; args: unknown[]; promise: Promise<unknown> }, ...rest: unknown[]) => {
    const name = command.name.toLowerCase()
    if (name === 'get' && String(command.args[0]) === key) counted.gets++
    if (scriptOf(command, files)?.startsWith('get-or-lock'))
      command.promise.then(
        () => counted.scriptReplies++,
        () => undefined,
      )
    return (send as (...a: unknown[]) => unknown)(command, ...rest)
  }) as typeof client.sendCommand
  return counted
}

describe.skipIf(!redisAvailable)('attack: the commit notice of a large value', () => {
  const caches: Cache[] = []
  const suite = useRedisServer({ cleanup: () => Promise.all(caches.splice(0).map((cache) => cache.close())) })

  function cacheOn(client: Redis): Cache {
    const made = createCache({ redis: client, ttl: '1m', l1: false, namespace: NS, waitTimeout: '20s' })
    caches.push(made)
    return made
  }

  it('notices with no value behind them, then with a corrupt one: the waiter parks again (0 loads, no garbage), then gets the holder value', async () => {
    const keys = entryKeys(NS, 'big')
    const admin = suite.admin()
    const holder = cacheOn(suite.client())
    const waiterClient = suite.client()
    const waiter = cacheOn(waiterClient)
    await Promise.all([holder.ready(), waiter.ready()])
    const reads = countGets(waiterClient, keys.fresh)
    let corrupt = 0
    waiter.on('corrupt', () => corrupt++)
    const release = gate()
    const bigValue = 'v'.repeat(1024 * 1024)
    const held = holder.getOrLoad('big', async () => (await release.promise, bigValue))
    await until(async () => (await admin.exists(keys.lock)) === 1, 'the holder to lock the key')
    let waiterLoads = 0
    const waited = waiter.getOrLoad('big', async () => (waiterLoads++, 'loaded by the waiter'))
    await until(async () => {
      const [, subscribers] = (await admin.pubsub('NUMSUB', keys.channel)) as [string, number]
      return Number(subscribers) >= 1
    }, 'the waiter to subscribe')
    // Parked: its first lookup and the re-check after subscribing have both answered 'held'.
    await until(() => reads.scriptReplies >= 2, 'the waiter to park')
    const before = reads.gets

    // A notice with nothing behind it (as if the value was deleted before the waiter read it).
    const lookups = reads.scriptReplies
    await admin.publish(keys.channel, `n|${Date.now()}`)
    await until(() => reads.gets >= before + 1, 'the waiter to read the empty fresh copy')
    // Its re-check answered (the lock is held: it parks again) before the corrupt copy is planted,
    // which that lookup would otherwise find and remove first.
    await until(() => reads.scriptReplies >= lookups + 1, 'the re-check after the empty notice')
    // A notice whose fresh copy is corrupt.
    await admin.set(keys.fresh, 'not|a|record', 'PX', 60_000)
    await admin.publish(keys.channel, `n|${Date.now()}`)
    await until(() => corrupt >= 1, 'the waiter to find the corrupt copy')
    await admin.del(keys.fresh)
    // Each notice was one read, and none of them made it load or answer.
    expect(reads.gets).toBe(before + 2)
    expect(waiterLoads).toBe(0)
    expect(await Promise.race([waited.then(() => 'answered'), new Promise((r) => setTimeout(r, 100, 'pending'))])).toBe(
      'pending',
    )

    release.open()
    expect(await held).toBe(bigValue)
    expect(await waited).toBe(bigValue)
    expect(waiterLoads).toBe(0)
    expect(reads.gets).toBe(before + 3) // the real notice: one read
  }, 30_000)
})
