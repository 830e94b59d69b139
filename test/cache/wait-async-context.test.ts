/**
 * A call that waits on another process's load goes on, once its wait is answered or runs out,
 * in the caller's async context, not in that of whatever read the news (a commit message on
 * the subscriber connection, a poll reply, the wait's deadline): its `waited` listener and a
 * loader it runs after the wait see the caller's AsyncLocalStorage. Two callers on two keys,
 * each with its own store, must each see their own.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { describe, expect, it } from 'vitest'
import type { Cache } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable } from '../support/redis.js'
import { gate, until } from '../support/timing.js'

describe.skipIf(!redisAvailable)("a wait on another process's load keeps the caller's async context", () => {
  const suite = useCacheSuite()
  const als = new AsyncLocalStorage<string>()

  /** A leader cache holding the locks of `keys` until `release` opens. */
  async function heldElsewhere(keys: string[], release: Promise<void>): Promise<Promise<unknown>[]> {
    const leader = suite.cache({ ttl: '10m', l1: false })
    await leader.ready()
    let started = 0
    const led = keys.map((key) => leader.getOrLoad(key, async () => (started++, await release, `leader ${key}`)))
    await until(() => started === keys.length, 'the leader to take the locks')
    return led
  }

  function waitsOf(cache: Cache): { waits: () => number; waitedIn: Map<string, string | undefined> } {
    let waits = 0
    const waitedIn = new Map<string, string | undefined>()
    cache.on('wait', () => waits++)
    cache.on('waited', ({ key }) => waitedIn.set(key, als.getStore()))
    return { waits: () => waits, waitedIn }
  }

  it('answered by the commit message: the waited event sees each caller its own store', async () => {
    const release = gate()
    const led = await heldElsewhere(['a', 'b'], release.promise)
    const waiter = suite.cache({ ttl: '10m', l1: false, waitTimeout: '20s' })
    await waiter.ready()
    const { waits, waitedIn } = waitsOf(waiter)
    const a = als.run('request a', () => waiter.getOrLoad('a', async () => 'own a'))
    const b = als.run('request b', () => waiter.getOrLoad('b', async () => 'own b'))
    await until(() => waits() === 2, 'both calls to wait')
    release.open()
    expect(await Promise.all([a, b])).toEqual(['leader a', 'leader b'])
    await Promise.all(led)
    expect(Object.fromEntries(waitedIn)).toEqual({ a: 'request a', b: 'request b' })
  }, 30_000)

  it('run out (onWaitTimeout load): the loader run after the wait sees the caller its own store', async () => {
    const release = gate()
    const led = await heldElsewhere(['c', 'd'], release.promise)
    const waiter = suite.cache({ ttl: '10m', l1: false, waitTimeout: '300ms', onWaitTimeout: 'load' })
    await waiter.ready()
    const { waits, waitedIn } = waitsOf(waiter)
    const loadedIn: Record<string, string | undefined> = {}
    const c = als.run('request c', () => waiter.getOrLoad('c', async () => ((loadedIn.c = als.getStore()), 'own c')))
    const d = als.run('request d', () => waiter.getOrLoad('d', async () => ((loadedIn.d = als.getStore()), 'own d')))
    const answers = await Promise.all([c, d])
    release.open()
    await Promise.allSettled(led)
    expect(answers).toEqual(['own c', 'own d'])
    expect(waits()).toBe(2)
    expect(loadedIn).toEqual({ c: 'request c', d: 'request d' })
    expect(Object.fromEntries(waitedIn)).toEqual({ c: 'request c', d: 'request d' })
  }, 30_000)
})
