/**
 * Attack on the notice of a large value with a short ttl: the fresh copy the notice points at
 * may be gone by the time the waiter reads it, where a carried value (under 64 KiB) answers the
 * waiter from the message itself. Counted: the waiter's own loads, small against large.
 *
 * Found, not fixed: 8 of 20 waits on a 1 MiB value with ttl 1 ms ran the waiter's own loader
 * (its GET found the fresh copy gone, its re-check found the lock free), against 0 of 20 for a
 * 1 KiB value. Any ttl shorter than a busy waiter's delay in reading the notice does the same,
 * in every waiting process. A fix is on the commit side (the value a notice points at must
 * outlive the notice's readers, without a GET hit serving it past its ttl), so the test is
 * skipped until then: it does not hold, and is not deterministic while it fails.
 */
import { describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../../src/index.js'
import { redisAvailable } from '../../support/redis.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { gate, until } from '../../support/timing.js'

const NS = 'short-notice'

describe.skipIf(!redisAvailable)('attack: a notice for a value whose ttl is shorter than the read', () => {
  const caches: Cache[] = []
  const suite = useRedisServer({ cleanup: () => Promise.all(caches.splice(0).map((cache) => cache.close())) })

  function cacheOn(): Cache {
    const made = createCache({ redis: suite.client(), ttl: '1m', l1: false, namespace: NS, waitTimeout: '20s' })
    caches.push(made)
    return made
  }

  async function waiterLoads(size: number, rounds: number): Promise<number> {
    const holder = cacheOn()
    const waiter = cacheOn()
    await Promise.all([holder.ready(), waiter.ready()])
    let waits = 0
    waiter.on('wait', () => waits++)
    let loads = 0
    for (let round = 0; round < rounds; round++) {
      const key = `k${size}-${round}`
      const value = 'v'.repeat(size)
      const release = gate()
      let started = false
      const held = holder.getOrLoad(key, async (context) => {
        started = true
        await release.promise
        context.cacheFor({ ttl: 1 })
        return value
      })
      await until(() => started, 'the holder to lock')
      const before = waits
      const waited = waiter.getOrLoad(key, async () => (loads++, value))
      await until(() => waits === before + 1, 'the waiter to wait')
      release.open()
      await held
      expect(await waited).toBe(value)
    }
    return loads
  }

  it.skip('ttl 1 ms: the waiter loads no more often for a 1 MiB value than for a 1 KiB one', async () => {
    const small = await waiterLoads(1024, 20)
    const large = await waiterLoads(1024 * 1024, 20)
    expect({ small, large }).toEqual({ small: 0, large: 0 })
  }, 120_000)
})
