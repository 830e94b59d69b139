/**
 * Leader election on Redis, in this process: terms, resign and hand-over, observe, the
 * clock-bound step-down, bad input, events. The cross-process fault runs are in
 * redis-faults.test.ts.
 */
import { describe, expect, it } from 'vitest'
import { InvalidArgumentError, LockLostError, LocksClosedError } from '../../../src/errors.js'
import { createLocks, type Leader } from '../../../src/lock/index.js'
import { Redis } from 'ioredis'
import { startBlackholeProxy } from '../../support/blackhole-proxy.js'
import { LOCK_ACQUIRES, LOCK_LOST } from '../../../src/observability/locks.js'
import { instrumentLocks } from '../../../src/observability/index.js'
import { metricsHarness, valueOf } from '../../support/otel.js'
import { useRedisServer } from '../../support/redis-suite.js'
import { abortReason, sleep, until } from '../../support/timing.js'

describe('leader election (Redis)', () => {
  const redis = useRedisServer()
  let count = 0
  const fresh = () => `election-${++count}`
  const newLocks = () => createLocks({ redis: redis.server().client(), lease: '1s', namespace: 'el' })

  it('elects one candidate; the next is elected when it resigns, with a higher term', async () => {
    const name = fresh()
    const [a, b] = [newLocks(), newLocks()]
    try {
      const first = await a.elect(name, { id: 'a' })
      let secondElected = false
      const second = b.elect(name, { id: 'b' }).then((l) => ((secondElected = true), l))
      await new Promise((resolve) => setTimeout(resolve, 300))
      expect(secondElected).toBe(false)
      expect(first.leading).toBe(true)
      await first.resign()
      expect(first.leading).toBe(false)
      const next = await second
      expect(next.id).toBe('b')
      expect(next.term).toBeGreaterThan(first.term)
      expect(first.signal.aborted).toBe(false) // resigned, not lost
      await next.resign()
    } finally {
      await Promise.all([a.close(), b.close()])
    }
  })

  it('observe reports the leader at start, each change, and nobody after the last resigns', async () => {
    const name = fresh()
    const [a, b, watcher] = [newLocks(), newLocks(), newLocks()]
    const seen: (Leader | undefined)[] = []
    const observer = watcher.observe(name)
    const reading = (async () => {
      for await (const leader of observer) seen.push(leader)
    })()
    try {
      await until(() => seen.length === 1, 'the first reading')
      expect(seen[0]).toBeUndefined()
      const first = await a.elect(name, { id: 'a' })
      await until(() => seen.length === 2, 'a reported')
      const second = b.elect(name, { id: 'b' })
      await first.resign()
      const next = await second
      await until(() => seen.at(-1)?.id === 'b', 'b reported')
      await next.resign()
      await until(() => seen.at(-1) === undefined, 'nobody reported')
      // Exactly the terms the candidates were told, in order, and nobody in between or after.
      const leaders = seen.filter((leader): leader is Leader => leader !== undefined)
      expect(leaders).toEqual([
        { id: 'a', term: first.term },
        { id: 'b', term: next.term },
      ])
      expect(observer.leader).toBeUndefined()
    } finally {
      await observer.close()
      await reading
      await Promise.all([a.close(), b.close(), watcher.close()])
    }
  })

  it('with an ioredis keyPrefix, observers still hear a new leader at once (not at the 5 s safety re-read)', async () => {
    const name = fresh()
    const prefixed = () => createLocks({ redis: redis.server().client({ keyPrefix: 'app:' }), namespace: 'el' })
    const [candidate, watcher] = [prefixed(), prefixed()]
    const observer = watcher.observe(name)
    try {
      await observer.ready
      expect(observer.leader).toBeUndefined()
      const startedAt = performance.now()
      const leadership = await candidate.elect(name, { id: 'prefixed' })
      await until(() => observer.leader?.term === leadership.term, 'the leader observed', 4_000)
      expect(performance.now() - startedAt).toBeLessThan(4_000)
      expect(await redis.admin().exists(`app:el:election:{l:${name}}:lock`)).toBe(1)
    } finally {
      await observer.close()
      await Promise.all([candidate.close(), watcher.close()])
    }
  })

  it('an observer given an aborted signal ends at once', async () => {
    const locks = newLocks()
    try {
      const observer = locks.observe(fresh(), { signal: AbortSignal.abort() })
      await observer.ready
      expect(observer.closed).toBe(true)
      const seen: unknown[] = []
      for await (const leader of observer) seen.push(leader)
      expect(seen).toEqual([])
    } finally {
      await locks.close()
    }
  })

  it('a leader whose lease cannot be renewed steps down by its own clock, before the store frees it', async () => {
    const name = fresh()
    const lock = `el:election:{l:${name}}:lock`
    const locks = createLocks({ redis: redis.server().client(), lease: 1_000, namespace: 'el' })
    const admin = redis.admin()
    const leadership = await locks.elect(name, { id: 'paused' })
    // No renewal reaches Redis from here on: writes are paused for longer than the lease.
    await admin.client('PAUSE', 2_500, 'WRITE')
    try {
      // Read the store first, then the leader's own clock (\`leading\` needs no timer to have
      // run): the key gone while this process still says it leads would be two leaders. Counted
      // by readings, not by when the step-down timer fires, which a loaded machine delays.
      let readings = 0
      for (const deadline = performance.now() + 10_000; performance.now() < deadline; readings++) {
        const pttl = await admin.pttl(lock)
        const leading = leadership.leading
        if (pttl <= 0) expect(leading, 'leading after the store freed the key').toBe(false)
        if (!leading) break
        await sleep(5)
      }
      expect(leadership.leading).toBe(false)
      expect(readings).toBeGreaterThan(0)
      const reason = await abortReason(leadership.signal, 'the leadership to end')
      expect(reason).toBeInstanceOf(LockLostError)
    } finally {
      await admin.client('UNPAUSE')
      await locks.close()
    }
  })

  it('a partitioned leader (traffic black-holed, "suspended") steps down before the next leader is elected', async () => {
    const name = fresh()
    const proxy = await startBlackholeProxy(redis.server().port)
    const cutOff = new Redis({ port: proxy.port, host: '127.0.0.1', maxRetriesPerRequest: 1 })
    cutOff.on('error', () => {})
    const [a, b] = [createLocks({ redis: cutOff, lease: 600, namespace: 'el' }), newLocks()]
    try {
      const leader = await a.elect(name, { id: 'partitioned' })
      let steppedDownAt = 0
      leader.signal.addEventListener('abort', () => (steppedDownAt = performance.now()), { once: true })
      const next = b.elect(name, { id: 'next', lease: 600 }).then((l) => ({ l, at: performance.now() }))
      proxy.blackhole()
      const { l: successor, at: electedAt } = await next
      expect(steppedDownAt).toBeGreaterThan(0)
      expect(steppedDownAt).toBeLessThan(electedAt)
      expect(successor.term).toBeGreaterThan(leader.term)
      console.log(
        `[election redis partition] the cut-off leader stepped down ${(electedAt - steppedDownAt).toFixed(0)} ms before the next was elected`,
      )
      await successor.resign()
    } finally {
      await Promise.all([a.close(), b.close()])
      cutOff.disconnect()
      await proxy.close()
    }
  })

  it('leading reads the clock: past the local deadline it is false and aborts the signal at once', async () => {
    const name = fresh()
    const locks = newLocks()
    try {
      const leadership = await locks.elect(name, { id: 'a', lease: 200 })
      // Block the event loop past the lease: no timer can run, as after a SIGSTOP.
      const until = performance.now() + 260
      while (performance.now() < until);
      expect(leadership.signal.aborted).toBe(false) // no timer has run yet
      expect(leadership.leading).toBe(false)
      expect(leadership.signal.aborted).toBe(true)
      expect(leadership.signal.reason).toBeInstanceOf(LockLostError)
    } finally {
      await locks.close()
    }
  })

  it('onElected runs each term in turn and the candidacy goes on until its signal aborts', async () => {
    const name = fresh()
    const [a, b] = [newLocks(), newLocks()]
    const stop = new AbortController()
    const terms: bigint[] = []
    let running = 0
    let most = 0
    const work = async (leadership: { term: bigint }) => {
      running++
      most = Math.max(most, running)
      terms.push(leadership.term)
      await new Promise((resolve) => setTimeout(resolve, 50))
      running--
    }
    try {
      const ids: string[] = []
      const tracked = async (leadership: { term: bigint; id: string }) => {
        ids.push(leadership.id)
        await work(leadership)
      }
      void a.elect(name, { id: 'a', onElected: tracked, signal: stop.signal })
      void b.elect(name, { id: 'b', onElected: tracked, signal: stop.signal })
      await until(() => terms.length >= 6, 'six terms')
      // Both got turns: a candidate that just resigned lets the waiting one in.
      expect(new Set(ids)).toEqual(new Set(['a', 'b']))
      stop.abort()
      expect(most).toBe(1)
      expect([...terms].sort((x, y) => (x < y ? -1 : 1))).toEqual(terms)
    } finally {
      await Promise.all([a.close(), b.close()])
    }
  })

  it('await using resigns; events report acquired then released, keyed by the name', async () => {
    const name = fresh()
    const locks = newLocks()
    const events: string[] = []
    locks.on('acquired', (e) => events.push(`acquired ${e.key} ${e.backend}`))
    locks.on('released', (e) => events.push(`released ${e.key}`))
    try {
      {
        await using leadership = await locks.elect(name)
        expect(leadership.id).toMatch(/:\d+:[0-9a-f]{8}$/)
      }
      expect(events).toEqual([`acquired ${name} redis`, `released ${name}`])
      expect(await redis.admin().exists(`el:election:{l:${name}}:lock`)).toBe(0)
    } finally {
      await locks.close()
    }
  })

  it('bad input is a typed error naming the argument, and sends nothing', async () => {
    const client = redis.server().client()
    await client.ping()
    const locks = createLocks({ redis: client, namespace: 'el' })
    const before = Number((await redis.admin().info('stats')).match(/total_commands_processed:(\d+)/)![1])
    try {
      for (const [call, argument] of [
        [() => locks.elect(''), 'name'],
        [() => locks.elect(42 as never), 'name'],
        [() => locks.elect('n', { id: '' }), 'id'],
        [() => locks.elect('n', { id: 'x'.repeat(257) }), 'id'],
        [() => locks.elect('n', { lease: 5 }), 'lease'],
        [() => locks.elect('n', { signal: 'no' as never }), 'signal'],
        [() => locks.elect('n', { onElected: 1 as never }), 'onElected'],
        [() => locks.elect('n', { term: 1 } as never), 'term'],
      ] as const) {
        const error = await call().catch((e: unknown) => e)
        expect(error).toBeInstanceOf(InvalidArgumentError)
        expect((error as InvalidArgumentError).argument).toBe(argument)
      }
      expect(() => locks.observe('')).toThrow(InvalidArgumentError)
      expect(() => locks.observe('n', { onError: 3 as never })).toThrow(/onError/)
      const after = Number((await redis.admin().info('stats')).match(/total_commands_processed:(\d+)/)![1])
      expect(after - before).toBe(1) // the INFO above
    } finally {
      await locks.close()
    }
  })

  it('close() ends a campaign with LocksClosedError and deposes a leader', async () => {
    const name = fresh()
    const [a, b] = [newLocks(), newLocks()]
    const leadership = await a.elect(name)
    const waiting = b.elect(name)
    await b.close()
    await expect(waiting).rejects.toBeInstanceOf(LocksClosedError)
    await a.close()
    expect(leadership.signal.reason).toBeInstanceOf(LockLostError)
    await expect(a.elect(name)).rejects.toBeInstanceOf(LocksClosedError)
  })

  it('a backend without elections refuses elect() and observe() with a typed error', async () => {
    const locks = createLocks({ redlock: [redis.server().client()] })
    try {
      await expect(locks.elect('x')).rejects.toMatchObject({ argument: 'elect' })
      expect(() => locks.observe('x')).toThrow(/holds no elections/)
    } finally {
      await locks.close()
    }
  })
})

describe('leader election metrics (instrumentLocks)', () => {
  const redis = useRedisServer()

  it('counts each term as an acquisition, and a deposed leader as a lost lock, like the mutex', async () => {
    const metrics = metricsHarness()
    const locks = createLocks({ redis: redis.server().client(), namespace: 'el-otel', lease: 300 })
    const instrumentation = instrumentLocks(locks, { meter: metrics.provider.getMeter('test') })
    try {
      const first = await locks.elect('metered')
      await first.resign()
      const second = await locks.elect('metered')
      await redis.admin().del('el-otel:election:{l:metered}:lock') // deposed: its renewal finds it gone
      await abortReason(second.signal, 'the leader to be deposed')
      const m = await metrics.collect()
      const backend = { 'stampede_guard.lock.backend': 'redis' }
      expect(valueOf(m, LOCK_ACQUIRES, { ...backend, 'stampede_guard.lock.result': 'acquired' })).toBe(2)
      expect(valueOf(m, LOCK_LOST, backend)).toBe(1)
    } finally {
      instrumentation.stop()
      await locks.close()
      await metrics.shutdown()
    }
  })
})
