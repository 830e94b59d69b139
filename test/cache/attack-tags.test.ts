/**
 * Attacks on tags (issue 15): interleavings the design notes (docs/tags.md) do not list.
 * Each test states the guarantee it holds the code to: once `await deleteByTag(t)`
 * resolves, no call that begins afterwards gets a value of a key tagged `t` loaded before.
 */
import { describe, expect, it } from 'vitest'
import { createCache, type Cache } from '../../src/index.js'
import { redisAvailable } from '../support/redis.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { gate, until } from '../support/timing.js'
import { cacheParts } from '../../src/cache/cache.js'

/** A tag message published after everything before it has reached `cache` (same subscriber connection, in order). */
async function heard(suite: ReturnType<typeof useCacheSuite>, cache: Cache, marker: string): Promise<void> {
  const before = cache.stats()['tag-invalidated']
  await suite.admin().publish('sg:__tag_invalidations', `test|${marker}`)
  await until(() => cache.stats()['tag-invalidated'] > before, 'the marker to reach the cache')
}

/** A store in the same server millisecond as an invalidation is refused by design: waits until the server clock is past `tag`'s. */
async function pastInvalidation(suite: ReturnType<typeof useCacheSuite>, tag: string): Promise<void> {
  const at = Number(await suite.admin().get(`sg:tag:{t:${tag}}:at`))
  await until(async () => {
    const [seconds, micros] = await suite.admin().time()
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) > at + 1
  }, 'the server clock to pass the invalidation')
}

describe.skipIf(!redisAvailable)('attacks on tags', () => {
  const suite = useCacheSuite()

  for (const how of ["the call's tags", 'ctx.tag'] as const) {
    it(`a call that begins after deleteByTag does not join a load that began before it (${how})`, async () => {
      const a = suite.cache()
      await a.ready()
      let version = 'old'
      const started = gate()
      const finish = gate()
      let loads = 0
      const loader = async (ctx: { tag(...tags: string[]): void }) => {
        loads++
        const read = version // the database read, before the invalidation
        started.open()
        await finish.promise
        if (how === 'ctx.tag') ctx.tag('t')
        return read
      }
      const options = how === 'ctx.tag' ? undefined : { tags: ['t'] }
      const inFlight = a.getOrLoad('k', loader, options)
      await started.promise
      version = 'new'
      await a.deleteByTag('t')
      const after = a.getOrLoad('k', async (ctx) => (loads++, how === 'ctx.tag' && ctx.tag('t'), version), options)
      finish.open()
      expect(await inFlight).toBe('old') // in flight when it ran: its own callers get it
      expect(await after).toBe('new') // began after deleteByTag resolved
      expect(loads).toBe(2)
    })
  }

  it('a call in another process that begins after the tag broadcast arrived does not join a load that began before', async () => {
    const [a, b] = [suite.cache(), suite.cache()]
    await Promise.all([a.ready(), b.ready()])
    let version = 'old'
    const started = gate()
    const finish = gate()
    const inFlight = b.getOrLoad('k', async (ctx) => {
      const read = version
      started.open()
      await finish.promise
      ctx.tag('t')
      return read
    })
    await started.promise
    version = 'new'
    await a.deleteByTag('t')
    await heard(suite, b, 'after')
    const after = b.getOrLoad('k', async (ctx) => (ctx.tag('t'), version))
    finish.open()
    expect(await inFlight).toBe('old')
    expect(await after).toBe('new')
  })

  it('without Redis, a call that begins after deleteByTag does not join a load that began before it', async () => {
    const cache = createCache({ ttl: '1m' })
    let version = 'old'
    const started = gate()
    const finish = gate()
    const inFlight = cache.getOrLoad(
      'k',
      async () => {
        const read = version
        started.open()
        await finish.promise
        return read
      },
      { tags: ['t'] },
    )
    await started.promise
    version = 'new'
    await cache.deleteByTag('t')
    const after = cache.getOrLoad('k', async () => version, { tags: ['t'] })
    finish.open()
    expect(await inFlight).toBe('old')
    expect(await after).toBe('new')
    await cache.close()
  })

  it('set() with tags right after createCache (server clock not measured yet) is stored, after a recent deleteByTag', async () => {
    const first = suite.cache()
    await first.deleteByTag('t') // `at` is set, for lock.maxHold + lock.lease
    await pastInvalidation(suite, 't')
    const fresh = suite.cache()
    await fresh.set('k', 'v', { tags: ['t'] })
    expect(fresh.stats().fenced).toBe(0)
    expect(await suite.admin().exists('sg:{k:k}:v')).toBe(1)
  })
})

describe.skipIf(!redisAvailable)('attacks on tags: Redis names', () => {
  const suite = useCacheSuite()

  it('every key the tags leave in Redis has an expiry, and the member set outlives its members', async () => {
    const a = suite.cache({ lock: { lease: 1_000, maxHold: 5_000 }, ttlJitter: 0 })
    const odd = ['a:b', 'ü-ñ-日本', 'pipe|bar', '{brace', 'close}', 'x'.repeat(1024), ' space ', 'tag:{t:y}:keys']
    for (const [i, tag] of odd.entries()) {
      await a.getOrLoad(`k${i}`, async () => i, {
        tags: [tag, 'all'],
        ttl: '20s',
        staleTtl: '40s',
        staleIfError: '60s',
      })
    }
    await a.set('s', 1, { tags: odd, ttl: '20s' })
    await a.deleteByTag(odd[0]!)
    await pastInvalidation(suite, odd[0]!)
    await a.getOrLoad('k0', async () => 'again', { tags: [odd[0]!] })
    const admin = suite.admin()
    for (const name of await admin.keys('sg:*')) {
      expect(await admin.pttl(name), name).toBeGreaterThan(0)
    }
    // The member set must not expire before a member's entry (absolute times): deleteByTag would miss it.
    for (const [i, tag] of odd.entries()) {
      if (i === 0 || tag.includes('{') || tag.includes('}')) continue
      const entry = Number(await admin.call('PEXPIRETIME', `sg:{k:k${i}}`))
      const members = Number(await admin.call('PEXPIRETIME', `sg:tag:{t:${tag}}:keys`))
      expect(members, tag).toBeGreaterThanOrEqual(entry)
    }
    for (const tag of odd.slice(1)) {
      await a.deleteByTag(tag)
    }
    for (const [i] of odd.entries())
      expect(await a.getOrLoad(`k${i}`, async () => 'new')).toBe(i === 0 ? 'again' : 'new') // k0 was reloaded with odd[0] only
    expect(await a.getOrLoad('s', async () => 'new')).toBe('new')
  })
})

describe.skipIf(!redisAvailable)('attacks on tags: grace, and a lost broadcast', () => {
  const suite = useCacheSuite()

  for (const loadedBy of ['itself', 'another cache'] as const) {
    it(`an L1 entry in grace (staleTtl) loaded by ${loadedBy} is not served after deleteByTag`, async () => {
      const [a, b] = [suite.cache(), suite.cache()]
      await Promise.all([a.ready(), b.ready()])
      const policy = { ttl: 50, staleTtl: '1m' }
      let version = 'old'
      const loader = async (ctx: { tag(...tags: string[]): void }) => (ctx.tag('t'), version)
      const owner = loadedBy === 'itself' ? b : a
      expect(await owner.getOrLoad('k', loader, policy)).toBe('old')
      if (loadedBy !== 'itself') expect(await b.getOrLoad('k', loader, policy)).toBe('old')
      await until(async () => (await suite.admin().exists('sg:{k:k}:v')) === 0, 'the fresh copy to expire (grace)')
      await new Promise((resolve) => setTimeout(resolve, 60)) // b's L1 copy is past its ttl too
      version = 'new'
      await a.deleteByTag('t')
      await heard(suite, b, 'after')
      expect(await b.getOrLoad('k', loader, policy)).toBe('new')
    })
  }

  it('a lost broadcast (subscriber killed): the suspect L1 entry is checked with Redis, not served', async () => {
    const [a, b] = [suite.cache(), suite.cache()]
    await Promise.all([a.ready(), b.ready()])
    const policy = { ttl: '1m', staleIfError: '1m' }
    expect(await a.getOrLoad('k', async () => 'old', { ...policy, tags: ['t'] })).toBe('old')
    expect(await b.getOrLoad('k', async () => 'unused', policy)).toBe('old') // in b's L1, untagged there
    const subscriber = (cacheParts(b).core.notifier as unknown as { subscriber: { status: string } }).subscriber
    await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    await until(() => subscriber.status !== 'ready', 'b to see its subscriber drop')
    await a.deleteByTag('t') // b does not hear it
    expect(await b.getOrLoad('k', async () => 'new', policy)).toBe('new') // not 'old' from L1
    expect(await a.getOrLoad('k', async () => 'unused', policy)).toBe('new')
  })

  // The suspect entry was the fail-safe fallback, and the lookup could not tell "deleted" from
  // "lost" (a Redis restart): get-or-lock now reports the fence, above the entry's version.
  it('a lost broadcast: a failing reload does not fall back to the value deleteByTag removed', async () => {
    const slow = suite.server().client({ retryStrategy: () => 5_000 }) // the subscriber stays down: the broadcast is missed
    slow.on('error', () => {})
    const [a, b] = [suite.cache(), suite.cache({ redis: slow })]
    try {
      await Promise.all([a.ready(), b.ready()])
      const policy = { ttl: '1m', staleIfError: '1m' }
      expect(await a.getOrLoad('k', async () => 'old', { ...policy, tags: ['t'] })).toBe('old')
      expect(await b.getOrLoad('k', async () => 'unused', policy)).toBe('old')
      const subscriber = (cacheParts(b).core.notifier as unknown as { subscriber: { status: string } }).subscriber
      await suite.admin().call('CLIENT', 'KILL', 'TYPE', 'pubsub')
      await until(() => subscriber.status !== 'ready', 'b to see its subscriber drop')
      await a.deleteByTag('t')
      const answer = await b
        .getOrLoad(
          'k',
          async () => {
            throw new Error('database down')
          },
          policy,
        )
        .then(
          (value) => value,
          (error: Error) => error.message,
        )
      expect(answer).toBe('database down')
      expect(subscriber.status).not.toBe('ready') // missed, not heard
    } finally {
      await b.close()
      slow.disconnect()
    }
  })
})

describe.skipIf(!redisAvailable)('attacks on tags: a small command budget', () => {
  const suite = useCacheSuite()
  const redisCommands = { maxInFlight: 4, maxQueued: 16 }

  it('deleteByTag of a tag listing more keys than redisCommands allows queued completes', async () => {
    const a = suite.cache({ redisCommands })
    for (let i = 0; i < 100; i++) await a.getOrLoad(`k${i}`, async () => 'old', { tags: ['t'] })
    expect(await suite.admin().scard('sg:tag:{t:t}:keys')).toBe(100)
    await a.deleteByTag('t')
    expect(await suite.admin().exists('sg:tag:{t:t}:keys', 'sg:tag:{t:t}:drain')).toBe(0)
    for (let i = 0; i < 100; i++) expect(await suite.admin().exists(`sg:{k:k${i}}:v`)).toBe(0)
  })

  it('deleteByTags of more tags than redisCommands allows queued completes', async () => {
    const a = suite.cache({ redisCommands })
    const tags = Array.from({ length: 40 }, (_, i) => `t${i}`)
    for (const [i, tag] of tags.entries()) {
      for (let j = 0; j < 5; j++) await a.getOrLoad(`k${i}-${j}`, async () => 'old', { tags: [tag] })
    }
    await a.deleteByTags(tags)
    expect(await suite.admin().keys('sg:tag:*:keys')).toEqual([])
    expect(await suite.admin().keys('sg:*:v')).toEqual([])
  })

  it('an entry with 64 tags is stored under a budget smaller than that', async () => {
    const a = suite.cache({ redisCommands })
    const tags = Array.from({ length: 64 }, (_, i) => `t${i}`)
    expect(await a.getOrLoad('k', async () => 'v', { tags })).toBe('v')
    expect(await suite.admin().exists('sg:{k:k}:v')).toBe(1)
  })
})

describe.skipIf(!redisAvailable)('attacks on tags: concurrent invalidations', () => {
  const suite = useCacheSuite()

  it('two concurrent deleteByTag calls with tagged loads and set() in between: afterwards nothing old is served', async () => {
    const [a, b, c] = [suite.cache(), suite.cache(), suite.cache({ l1: false })]
    await Promise.all([a.ready(), b.ready(), c.ready()])
    let version = 0
    const loader = async (ctx: { tag(...tags: string[]): void }) => {
      const read = version
      await new Promise((resolve) => setImmediate(resolve))
      ctx.tag('t')
      return read
    }
    const keys = Array.from({ length: 300 }, (_, i) => `k${i}`) // more than one SSCAN batch
    await Promise.all(keys.map((key) => a.getOrLoad(key, loader)))
    await Promise.all(keys.map((key) => b.getOrLoad(key, loader)))
    version = 1
    const churn = Promise.all(
      keys.map((key, i) => (i % 3 === 0 ? c.set(key, 0, { tags: ['t'] }).catch(() => {}) : c.getOrLoad(key, loader))),
    )
    await Promise.all([a.deleteByTag('t'), b.deleteByTag('t'), churn])
    await heard(suite, a, 'a-after')
    await heard(suite, b, 'b-after')
    for (const cache of [a, b, c]) {
      for (const key of keys) expect(await cache.getOrLoad(key, loader), key).not.toBe(0)
    }
  })
})

describe.skipIf(!redisAvailable)('attacks on tags: planted data', () => {
  const suite = useCacheSuite()

  for (const planted of ['garbage', '1e400', '-5']) {
    it(`an invalidation time \`at\` that is not a decimal integer (${planted}) refuses one commit, is removed, and the next load is stored`, async () => {
      const admin = suite.admin()
      await admin.set('sg:tag:{t:t}:at', planted)
      const a = suite.cache()
      let loads = 0
      expect(await a.getOrLoad('k', async () => ++loads, { tags: ['t'], ttl: '20s' })).toBe(1)
      expect(await admin.exists('sg:tag:{t:t}:at')).toBe(0)
      expect(await admin.exists('sg:{k:k}:v')).toBe(0)
      expect(await a.getOrLoad('k2', async () => ++loads, { tags: ['t'], ttl: '20s' })).toBe(2)
      expect(await admin.exists('sg:{k:k2}:v')).toBe(1)
      expect(await admin.sismember('sg:tag:{t:t}:keys', 'k2')).toBe(1)
      await a.close()
    })
  }
})
