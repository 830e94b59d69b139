/**
 * `createLocks` and a cache given the same namespace on one Redis. Lock keys used to be the
 * cache's `<ns>:{k:<key>}` names: a withLock after cache.delete() replaced the entry's
 * tombstone (its fence) with the lock's token counter, the cache then removed that as a
 * foreign type, and a load begun before the delete stored its old value. Locks now live
 * under `{l:<key>}`.
 */
import { describe, expect, it } from 'vitest'
import { createLocks } from '../../../src/index.js'
import { useCacheSuite } from '../../support/cache-suite.js'
import { redisAvailable } from '../../support/redis.js'
import { gate, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('a cache and createLocks sharing one namespace', () => {
  const suite = useCacheSuite()

  it("withLock after cache.delete() keeps the delete's fence: a load begun before the delete is not stored", async () => {
    const locks = createLocks({ redis: suite.client(), namespace: 'sg' })
    try {
      const [a, b] = [suite.cache({ l1: false }), suite.cache({ l1: false, waitTimeout: 50 })]
      await Promise.all([a.ready(), b.ready()])
      let version = 'old'
      // a leads a load (holding the cache's lock); b waits for it, gives up after waitTimeout,
      // and loads with a fenced token but no lock: the load that began before the delete.
      const aStarted = gate()
      const aFinish = gate()
      const leading = a.getOrLoad('k', async () => (aStarted.open(), await aFinish.promise, version))
      await aStarted.promise
      const bStarted = gate()
      const bFinish = gate()
      const stale = b.getOrLoad('k', async () => {
        const read = version // the database read, before the change
        bStarted.open()
        await bFinish.promise
        return read
      })
      await bStarted.promise
      aFinish.open()
      expect(await leading).toBe('old')
      await until(async () => (await suite.admin().exists('sg:{k:k}:lock')) === 0, "a's cache lock to be released")

      version = 'new'
      await a.delete('k')
      expect(await locks.withLock('k', () => 'locked')).toBe('locked') // the cache's lock is free: it takes its own
      const types = [await suite.admin().type('sg:{k:k}'), await suite.admin().type('sg:{l:k}')]

      bFinish.open()
      expect(await stale).toBe('old') // its own caller gets it
      expect(await suite.admin().exists('sg:{k:k}:v')).toBe(0) // and nothing else: it is not stored
      expect(await suite.admin().hget('sg:{k:k}', 'd')).toBeNull()
      expect(b.stats().fenced).toBe(1)
      expect(await a.getOrLoad('k', async () => version)).toBe('new')
      expect(types).toEqual(['hash', 'string']) // the tombstone with its fence; the lock's token counter
    } finally {
      await locks.close()
    }
  })
})
