/**
 * Attack on the notice threshold: values whose commit record falls on each side of 64 KiB (the
 * last byte carried in the message, the first sent as a notice), one byte at a time. A waiter
 * in another cache must get each value whole from the holder's one load, whichever way it
 * came. Counted: the waiter's loads, the values it got, and the messages of each kind seen.
 */
import { describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../../src/index.js'
import { redisAvailable } from '../../support/redis.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { gate, until } from '../../support/timing.js'

const NS = 'threshold'
const NOTICE_ABOVE = 65_536
/** The record's header (x|s|e|l|t|f|) is about 70 bytes: this range crosses the threshold. */
const SIZES = Array.from({ length: 120 }, (_, i) => NOTICE_ABOVE - 100 + i)

describe.skipIf(!redisAvailable)('attack: values around the notice threshold', () => {
  const caches: Cache[] = []
  const suite = useRedisServer({ cleanup: () => Promise.all(caches.splice(0).map((cache) => cache.close())) })

  function cacheOn(): Cache {
    const made = createCache({ redis: suite.client(), ttl: '1m', l1: false, namespace: NS, waitTimeout: '20s' })
    caches.push(made)
    return made
  }

  it('every size from 100 bytes below to 20 above: the waiter gets it whole, 0 loads, both kinds of message seen', async () => {
    const holder = cacheOn()
    const waiter = cacheOn()
    await Promise.all([holder.ready(), waiter.ready()])
    const kinds = { c: 0, n: 0 }
    const listener = suite.client()
    listener.on('pmessageBuffer', (_pattern: Buffer, _channel: Buffer, message: Buffer) => {
      const kind = message.subarray(0, 1).toString()
      if (kind === 'c' || kind === 'n') kinds[kind]++
    })
    await listener.psubscribe(`${NS}:*`)
    let waits = 0
    waiter.on('wait', () => waits++)
    let waiterLoads = 0
    for (const size of SIZES) {
      const key = `s${size}`
      const value = 'v'.repeat(size - 2) // JSON adds the quotes
      const release = gate()
      let started = false
      const held = holder.getOrLoad(key, async () => ((started = true), await release.promise, value))
      await until(() => started, 'the holder to lock')
      const before = waits
      const waited = waiter.getOrLoad(key, async () => (waiterLoads++, 'own'))
      await until(() => waits === before + 1, 'the waiter to wait')
      release.open()
      expect(await held).toBe(value)
      const got = await waited
      expect(typeof got === 'string' && got.length).toBe(value.length)
      expect(got === value).toBe(true)
    }
    expect(waiterLoads).toBe(0)
    await until(() => kinds.c + kinds.n === SIZES.length, 'every commit message')
    expect(kinds.c).toBeGreaterThan(0)
    expect(kinds.n).toBeGreaterThan(0)
  }, 120_000)
})
