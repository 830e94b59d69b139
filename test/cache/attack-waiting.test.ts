/**
 * Attacks on the ceiling of cross-process waits (`maxPendingWaits`): a wait's place is given back
 * when the wait ends, not when the flight does, so loads that follow a wait do not
 * count as waits and wrongly cap later ones.
 */
import type { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { CacheClosedError, createCache, type Cache } from '../../src/index.js'
import { entryKeys } from '../../src/cache/redis/keys.js'
import { redisAvailable } from '../support/redis.js'
import { useRedisServer } from '../support/redis-suite.js'
import { countScripts } from '../support/script-calls.js'
import { gate, until } from '../support/timing.js'

describe.skipIf(!redisAvailable)('attack: maxPendingWaits counts waits, not the loads after them', () => {
  const suite = useRedisServer()

  function cacheOn(options: Parameters<typeof createCache>[0] extends infer O ? Partial<O> : never): {
    cache: Cache
    client: Redis
  } {
    const client = suite.server().client()
    const cache = createCache({ redis: client, ttl: '1m', l1: false, namespace: 'capped', ...options } as never)
    return { cache, client }
  }

  it('a flight that waited and then took the lock frees its place in maxPendingWaits while its loader runs', async () => {
    const holder = cacheOn({})
    const waiter = cacheOn({ maxPendingWaits: 1, onWaitTimeout: 'throw', waitTimeout: '20s', lock: { lease: '10s' } })
    await Promise.all([holder.cache.ready(), waiter.cache.ready()])
    // A holder that died: its lock on "x" ends with its lease, and the waiter takes it over.
    await suite.admin().set(entryKeys('capped', 'x').lock, 'dead-owner:1', 'PX', 400)
    const slowLoad = gate()
    let xLoads = 0
    const x = waiter.cache.getOrLoad('x', async () => {
      xLoads++
      await slowLoad.promise
      return 'x-from-waiter'
    })
    await until(() => xLoads === 1, 'the waiter to take over the lock on x and load it', 10_000)
    // Now another process holds "y": the waiter waits on it (it waits on nothing else).
    const holderLoad = gate()
    const y1 = holder.cache.getOrLoad('y', async () => {
      await holderLoad.promise
      return 'y-from-holder'
    })
    await until(async () => (await suite.admin().exists(entryKeys('capped', 'y').lock)) === 1, 'the holder to lock y')
    let yDecided = false // the waiter has waited on y, or been refused a wait (the bug)
    const decided = ({ key }: { key: string }) => {
      if (key === 'y') yDecided = true
    }
    waiter.cache.on('wait', decided)
    waiter.cache.on('wait-capped', decided)
    const y2 = waiter.cache.getOrLoad('y', async () => 'y-from-waiter').catch((error: unknown) => error)
    await until(() => yDecided, 'the waiter to wait on y (or be refused)')
    holderLoad.open()
    expect(await y1).toBe('y-from-holder')
    // Before: LockWaitTimeoutError "1 cross-process waits (maxPendingWaits) were running" (the load of x).
    expect(await y2).toBe('y-from-holder')
    slowLoad.open()
    expect(await x).toBe('x-from-waiter')
    await Promise.all([holder.cache.close(), waiter.cache.close()])
    holder.client.disconnect()
    waiter.client.disconnect()
  }, 30_000)

  it('close() with a cross-process wait pending: the wait ends at once (CacheClosedError), no loader runs, the holder commits regardless', async () => {
    const holder = cacheOn({})
    const waiter = cacheOn({ waitTimeout: '20s' })
    const sent = countScripts(waiter.client)
    await Promise.all([holder.cache.ready(), waiter.cache.ready()])
    const holderLoad = gate()
    const held = holder.cache.getOrLoad('z', async () => {
      await holderLoad.promise
      return 'z-from-holder'
    })
    await until(async () => (await suite.admin().exists(entryKeys('capped', 'z').lock)) === 1, 'the holder to lock z')
    let waiterLoads = 0
    const waiting = waiter.cache.getOrLoad('z', async () => {
      waiterLoads++
      return 'z-from-waiter'
    })
    waiting.catch(() => {}) // asserted below
    await until(() => (sent['get-or-lock.lua']?.calls ?? 0) >= 2, 'the waiter to look up, subscribe and look again')
    const lookups = sent['get-or-lock.lua']!.calls
    const startedAt = performance.now()
    // Decided (docs/resilience.md, "Closing with calls waiting"): a closing process answers its
    // waiters now rather than hold close() to their waitTimeout for another process's load.
    await waiter.cache.close()
    expect(performance.now() - startedAt).toBeLessThan(5_000) // not the 20 s waitTimeout
    await expect(waiting).rejects.toBeInstanceOf(CacheClosedError)
    holderLoad.open()
    expect(await held).toBe('z-from-holder')
    expect(waiterLoads).toBe(0)
    expect(sent['get-or-lock.lua']!.calls - lookups).toBeLessThanOrEqual(1)
    await holder.cache.close()
    holder.client.disconnect()
    waiter.client.disconnect()
  }, 30_000)
})
