/**
 * Multi-key locks (`withLocks`) on Redis: all or none, one canonical order (no deadlock
 * between [a, b] and [b, a]), nothing left held after a timeout or an abort mid-way,
 * tokens per key, bad input; random overlapping key sets checked with fast-check.
 */
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import { InvalidArgumentError, LockBusyError } from '../../../src/errors.js'
import { createLocks, type Locks } from '../../../src/lock/index.js'
import { slotRuns } from '../../../src/lock/multi/redis.js'
import { RedisLockBackend } from '../../../src/lock/redis/backend.js'
import { keySlot } from '../../../src/redis/failing-clock.js'
import { lockKeys } from '../../../src/lock/redis/keys.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { countScripts } from '../../support/script-calls.js'
import { sleep, until } from '../../support/timing.js'

describe('multi-key locks (Redis)', () => {
  const redis = useRedisServer()
  let count = 0
  const fresh = (label: string) => `${label}-${++count}`
  const opened: Locks[] = []
  const newLocks = () => {
    const locks = createLocks({ redis: redis.server().client(), lease: '1s', namespace: 'ml' })
    opened.push(locks)
    return locks
  }
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((l) => l.close()))
  })
  const held = async (locks: Locks, key: string) => {
    const lock = await locks.tryAcquire(key)
    await lock?.release()
    return lock === undefined
  }

  it('takes every key, gives each its token, and releases them all after fn', async () => {
    const [a, b, c] = [fresh('a'), fresh('b'), fresh('c')]
    const locks = newLocks()
    const other = newLocks()
    const result = await locks.withLocks([c, a, b, a], async (all) => {
      expect(all.keys).toEqual([a, b, c]) // deduplicated, canonical order
      for (const key of [a, b, c]) expect(await held(other, key)).toBe(true)
      expect([...all.tokens.keys()]).toEqual([a, b, c])
      expect(all.lock(b).token).toBe(all.tokens.get(b))
      expect(() => all.lock('nope')).toThrow(InvalidArgumentError)
      return 'done'
    })
    expect(result).toBe('done')
    for (const key of [a, b, c]) expect(await held(other, key)).toBe(false)
  })

  it('all or none: a key that stays busy past the wait leaves none of the others held', async () => {
    const [a, b, c] = [fresh('a'), fresh('b'), fresh('c')]
    const [locks, holder] = [newLocks(), newLocks()]
    const blocker = await holder.acquire(b)
    let ran = false
    const error = await locks.withLocks([a, b, c], () => (ran = true), { wait: 200 }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockBusyError)
    expect((error as LockBusyError).key).toBe(b)
    expect(ran).toBe(false)
    expect(await held(holder, a)).toBe(false)
    expect(await held(holder, c)).toBe(false)
    await blocker.release()
  })

  it('one acquire-many.lua call takes every key of one slot: nothing is held while it waits', async () => {
    const [a, b, c] = [fresh('a'), fresh('b'), fresh('c')]
    const client = redis.server().client()
    const locks = createLocks({ redis: client, lease: '1s', namespace: 'ml' })
    opened.push(locks)
    await locks.withLocks([fresh('warm-up'), fresh('warm-up')], () => {}) // the script is loaded (EVAL once)
    const scripts = countScripts(client)
    const acquired: string[] = []
    locks.on('acquired', (e) => acquired.push(e.key))
    await locks.withLocks([c, b, a], () => {})
    expect(scripts['acquire-many.lua']).toEqual({ calls: 1, keys: 6 })
    expect(scripts['acquire.lua']).toBeUndefined()
    expect(acquired).toEqual([a, b, c])
    // Busy: it waits holding none of them, then takes all three in one call after the release.
    const blocker = await newLocks().acquire(b)
    const call = locks.withLocks([a, b, c], () => 'done', { wait: '5s' })
    await sleep(200)
    expect(await redis.admin().exists(`ml:{l:${a}}:lock`, `ml:{l:${c}}:lock`)).toBe(0)
    await blocker.release()
    await expect(call).resolves.toBe('done')
  })

  it('an abort mid-acquisition (one key at a time: holding a, waiting for b) rejects with its reason and leaves a free', async () => {
    const [a, b] = [fresh('a'), fresh('b')]
    // A backend without the one-step acquisition takes the keys one by one.
    const backend = new RedisLockBackend(redis.server().client(), { namespace: 'ml', commandTimeoutMs: 1_000 })
    const locks = createLocks({
      backend: { name: 'redis', acquire: (r) => backend.acquire(r), close: () => backend.close() },
    })
    opened.push(locks)
    const holder = newLocks()
    const blocker = await holder.acquire(b)
    const abort = new AbortController()
    const call = locks.withLocks([a, b], () => 'never', { wait: '10s', signal: abort.signal })
    await until(async () => (await redis.admin().exists(`ml:{l:${a}}:lock`)) === 1, 'a to be taken')
    abort.abort(new Error('user gave up'))
    await expect(call).rejects.toThrow('user gave up')
    expect(await redis.admin().exists(`ml:{l:${a}}:lock`)).toBe(0)
    await blocker.release()
  })

  it('[a, b] and [b, a] from two Locks, 40 rounds each, concurrently: no deadlock, never together', async () => {
    const [a, b] = [fresh('a'), fresh('b')]
    const [one, two] = [newLocks(), newLocks()]
    let inside = 0
    let overlaps = 0
    const run = (locks: Locks, keys: string[]) =>
      (async () => {
        for (let i = 0; i < 40; i++) {
          await locks.withLocks(
            keys,
            async () => {
              if (++inside > 1) overlaps++
              await sleep(1)
              inside--
            },
            { wait: '10s' },
          )
        }
      })()
    await Promise.all([run(one, [a, b]), run(two, [b, a])])
    expect(overlaps).toBe(0)
  })

  it('random overlapping key sets from three Locks: each key has one holder at a time, every call completes', async () => {
    const clients = [newLocks(), newLocks(), newLocks()]
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.subarray(['k1', 'k2', 'k3', 'k4'], { minLength: 1 })), {
          minLength: 3,
          maxLength: 10,
        }),
        async (calls) => {
          const prefix = fresh('fc')
          const holders = new Map<string, number>()
          let violations = 0
          await Promise.all(
            calls.map(([who, keys]) =>
              clients[who]!.withLocks(
                keys.map((k) => `${prefix}:${k}`),
                async ({ keys: taken }) => {
                  for (const key of taken) holders.set(key, (holders.get(key) ?? 0) + 1)
                  if (taken.some((key) => holders.get(key)! > 1)) violations++
                  await sleep(2)
                  for (const key of taken) holders.set(key, holders.get(key)! - 1)
                },
                { wait: '10s' },
              ),
            ),
          )
          expect(violations).toBe(0)
        },
      ),
      { numRuns: 20 },
    )
  })

  it('bad input is a typed error naming the argument, and sends nothing', async () => {
    const client = redis.server().client()
    await client.ping()
    const locks = createLocks({ redis: client, namespace: 'ml' })
    opened.push(locks)
    const before = Number((await redis.admin().info('stats')).match(/total_commands_processed:(\d+)/)![1])
    for (const [keys, fn, options, argument] of [
      ['a' as never, () => {}, undefined, 'keys'],
      [[], () => {}, undefined, 'keys'],
      [['a', ''], () => {}, undefined, 'keys[1]'],
      [['a', 3 as never], () => {}, undefined, 'keys[1]'],
      [Array.from({ length: 101 }, (_, i) => `k${i}`), () => {}, undefined, 'keys'],
      [['a'], 'fn' as never, undefined, 'fn'],
      [['a'], () => {}, { wait: 'soon' }, 'wait'],
    ] as const) {
      const error = await locks.withLocks(keys as never, fn as never, options as never).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect((error as InvalidArgumentError).argument).toBe(argument)
    }
    const after = Number((await redis.admin().info('stats')).match(/total_commands_processed:(\d+)/)![1])
    expect(after - before).toBe(1) // the INFO above
  })

  it('with reentrant, keys the call chain already holds are reused, the others taken', async () => {
    const [a, b] = [fresh('a'), fresh('b')]
    const locks = newLocks()
    await locks.withLock(a, async (outer) => {
      await locks.withLocks(
        [a, b],
        async ({ tokens }) => {
          expect(tokens.get(a)).toBe(outer.token)
        },
        { reentrant: true },
      )
      expect(await redis.admin().exists(`ml:{l:${a}}:lock`)).toBe(1) // still the outer call's
    })
  })
})

describe('multi-key runs on a Cluster (slotRuns)', () => {
  const cluster = { isCluster: true, options: {} } as never
  const slotOf = (key: string) => keySlot(lockKeys('ml', key).lock)
  // Two keys whose locks share a slot, found by search (each key has a hash tag of its own).
  const first = 'k0'
  let twin = ''
  for (let i = 1; !twin; i++) if (slotOf(`k${i}`) === slotOf(first)) twin = `k${i}`
  // 'k0' < 'k0-<n>' < 'k<m>' for any m ≥ 1: a key sorting between the two, in another slot.
  const between = [...Array(100).keys()].map((n) => `k0-${n}`).find((key) => slotOf(key) !== slotOf(first))!

  it('groups only consecutive keys of one slot: a key of another slot between them splits the run', () => {
    expect(slotRuns(cluster, 'ml', [first, twin].sort())).toEqual([[first, twin].sort()])
    expect(between > first && between < twin).toBe(true)
    expect(slotRuns(cluster, 'ml', [first, between, twin])).toEqual([[first], [between], [twin]])
    expect(slotRuns({ isCluster: false, options: {} } as never, 'ml', ['a', 'b', 'c'])).toEqual([['a', 'b', 'c']])
  })
})
