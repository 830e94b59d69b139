import { spawn } from 'node:child_process'
import type { Redis } from 'ioredis'
import { beforeAll, describe, expect, it } from 'vitest'
import { createCache, LoaderTimeoutError, LockLostError } from '../../src/index.js'
import { useCacheSuite } from '../support/cache-suite.js'
import { redisAvailable, startRedis, type RedisServer } from '../support/redis.js'
import { gate, sleep, until } from '../support/timing.js'
import { cacheParts } from '../../src/cache/cache.js'

describe('timeouts (in-process)', () => {
  it('softTimeout answers with the stale value and the slow load still fills the cache', async () => {
    const cache = createCache({ ttl: 50, staleIfError: '1m', softTimeout: 30 })
    await cache.getOrLoad('k', async () => 'old')
    await sleep(80)
    let finished = false
    const slow = gate() // the load outlasts softTimeout however slow the machine
    const result = await cache.getOrLoadResult('k', async () => {
      await slow.promise
      finished = true
      return 'new'
    })
    expect(result).toEqual({ value: 'old', outcome: 'stale' })
    expect(finished).toBe(false)
    expect(cache.stats().timeout).toBe(1)
    slow.open()
    await cache.close() // waits for the load
    expect(finished).toBe(true)
  })

  it('softTimeout without a stale value waits for the loader', async () => {
    const cache = createCache({ ttl: '1m', softTimeout: 10 })
    expect(await cache.getOrLoad('k', async () => (await sleep(60), 'v'))).toBe('v')
    await cache.close()
  })

  it('hardTimeout throws LoaderTimeoutError, and the load still fills the cache', async () => {
    const cache = createCache({ ttl: '1m', hardTimeout: 30 })
    const slow = gate() // the load outlasts hardTimeout however slow the machine
    const error = await cache.getOrLoad('k', async () => (await slow.promise, 'late')).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LoaderTimeoutError)
    expect((error as LoaderTimeoutError).timeoutMs).toBe(30)
    slow.open()
    await until(() => cache.stats().load === 1, 'the late load to finish') // and be stored in L1
    expect(await cache.getOrLoadResult('k', async () => 'unused')).toEqual({ value: 'late', outcome: 'hit' })
    await cache.close()
  })

  it('hardTimeout with a stale fallback serves the stale value instead of throwing', async () => {
    const cache = createCache({ ttl: 30, staleIfError: '1m', hardTimeout: 40 })
    await cache.getOrLoad('k', async () => 'old')
    await sleep(50)
    const slow = gate() // the load outlasts hardTimeout however slow the machine
    expect(await cache.getOrLoad('k', async () => (await slow.promise, 'new'))).toBe('old')
    slow.open()
    await cache.close()
  })

  it('XFetch refreshes early with a probability that grows as expiry nears', async () => {
    // δ = 100 ms load time, β = 1: P(refresh) = exp(-remaining/δ).
    const cache = createCache({ ttl: '1m', earlyRefresh: 'xfetch' })
    const { core } = cacheParts(cache)
    const due = (
      core as unknown as { dueForEarlyRefresh(c: object, e: object, n: number): boolean }
    ).dueForEarlyRefresh.bind(core)
    const call = { key: 'k', policy: { ttl: 60_000, earlyRefresh: { kind: 'xfetch', beta: 1 } } }
    const rate = (remaining: number) => {
      let hits = 0
      for (let i = 0; i < 4000; i++)
        if (due(call, { freshUntil: 1000 + remaining, loadMs: 100, ttlMs: 60_000 }, 1000)) hits++
      return hits / 4000
    }
    expect(rate(1_000)).toBeLessThan(0.01) // e^-10
    expect(rate(100)).toBeGreaterThan(0.3) // e^-1 ≈ 0.37
    expect(rate(100)).toBeLessThan(0.45)
    expect(rate(5)).toBeGreaterThan(0.9)
    await cache.close()
  })
})

describe.skipIf(!redisAvailable)('resilience with Redis', () => {
  const suite = useCacheSuite()
  const cache = suite.cache
  let server: RedisServer
  let admin: Redis
  beforeAll(() => {
    server = suite.server()
    admin = suite.admin()
  })

  it('a paused (SIGSTOPped) Redis costs at most the command timeout: calls fall back to the loader', async () => {
    const c = cache({ l1: false, redisTimeout: 300 })
    await c.getOrLoad('warm', async () => 'cached')
    server.pause()
    try {
      const started = performance.now()
      const values = await Promise.all([
        c.getOrLoad('warm', async () => (await sleep(50), 'from-loader')),
        c.getOrLoad('cold', async () => 'cold'),
      ])
      const elapsed = performance.now() - started
      expect(values).toEqual(['from-loader', 'cold'])
      // 300 ms timeout + 50 ms loader; the bound is loose so a busy machine cannot fail it, but a hang would.
      expect(elapsed).toBeLessThan(5_000)
    } finally {
      server.resume()
    }
    expect(c.stats()['redis-error']).toBeGreaterThan(0)
  })

  it('DEBUG SLEEP on the server: calls still finish within the timeout plus the loader time', async () => {
    const c = cache({ l1: false, redisTimeout: 200 })
    const sleeper = suite.client()
    await sleeper.ping() // connected, so DEBUG SLEEP is written at once, ahead of the cache's commands
    await c.getOrLoad('connected', async () => 'x') // the cache's own connection is up too
    const blocked = sleeper.call('DEBUG', 'SLEEP', '3')
    // The server is asleep once a probe goes unanswered for a while (it is answered after the sleep).
    let probe = admin.ping()
    for (const deadline = Date.now() + 1_000; Date.now() < deadline; probe = admin.ping()) {
      if (await Promise.race([probe.then(() => false), sleep(100).then(() => true)])) break
    }
    const started = performance.now()
    expect(await c.getOrLoad('k', async () => 'v')).toBe('v')
    expect(performance.now() - started).toBeLessThan(2_500) // less than the sleep itself
    await probe
    await blocked
  })

  it('watchdog: a loader running 3× the lease keeps the lock (renewals observed) and no second leader starts', async () => {
    const lease = 300
    const leader = cache({ lock: { lease } })
    const other = cache({ lock: { lease } })
    await admin.config('RESETSTAT')
    let otherLoads = 0
    const started = gate()
    const held = gate()
    let startedAt = 0
    const led = leader.getOrLoad(
      'slow',
      async () => (started.open(), (startedAt = performance.now()), await held.promise, 'v'),
    )
    await started.promise // the leader holds the lock
    const waited = other.getOrLoad('slow', async () => (otherLoads++, 'second'))
    await sleep(lease * 1.5)
    expect(await admin.get('sg:{k:slow}:lock')).not.toBeNull() // still held, past its first lease
    await sleep(Math.max(0, startedAt + lease * 3 - performance.now())) // the loader runs at least 3× the lease
    held.open()
    expect(await led).toBe('v')
    expect(await waited).toBe('v')
    expect(otherLoads).toBe(0)
    const stats = await admin.info('commandstats')
    expect(Number(/cmdstat_pexpire:calls=(\d+)/.exec(stats)?.[1] ?? 0)).toBeGreaterThanOrEqual(2)
  })

  it("a stolen lock aborts the loader's signal and its late write is fenced", async () => {
    const lease = 300
    const victim = cache({ lock: { lease } })
    const thief = cache({ lock: { lease } })
    let abortReason: unknown
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    let started!: () => void
    const loaderStarted = new Promise<void>((resolve) => (started = resolve))
    const victimLoad = victim.getOrLoad('stolen', async ({ signal }) => {
      signal.addEventListener('abort', () => (abortReason = signal.reason))
      started()
      await held
      return 'late'
    })
    await loaderStarted // the victim holds the lock
    expect(await admin.del('sg:{k:stolen}:lock')).toBe(1)
    const deadline = Date.now() + 5_000
    while (abortReason === undefined && Date.now() < deadline) await sleep(20)
    expect(abortReason).toBeInstanceOf(LockLostError)
    expect(await thief.getOrLoad('stolen', async () => 'newer')).toBe('newer')
    release()
    expect(await victimLoad).toBe('late')
    expect(victim.stats()['lock-lost']).toBe(1)
    expect(victim.stats().fenced).toBe(1)
    expect(JSON.parse((await admin.hget('sg:{k:stolen}', 'd'))!)).toBe('newer')
  })

  it('close() leaves the event loop empty and nothing unhandled (a child process exits by itself)', async () => {
    const script = `
      import { Redis } from 'ioredis'
      import { createCache } from ${JSON.stringify(new URL('../../src/index.ts', import.meta.url).href)}
      process.on('unhandledRejection', (e) => { console.error('unhandled', e); process.exit(3) })
      const redis = new Redis(${JSON.stringify(server.url)})
      const cache = createCache({ redis, ttl: '1s', staleTtl: '1s', earlyRefresh: 0.5, lock: { lease: 300 } })
      await Promise.all([1, 2, 3].map((i) => cache.getOrLoad('k' + i, async () => { await new Promise((r) => setTimeout(r, 400)); return i })))
      await cache.getOrLoad('bad', async () => { throw new Error('x') }).catch(() => {})
      await cache.delete('k1')
      await cache.close()
      await redis.quit()
    `
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: process.cwd(),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk) => (stderr += chunk))
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL')
        resolve(null)
      }, 20_000)
      child.on('exit', (exitCode) => {
        clearTimeout(timer)
        resolve(exitCode)
      })
    })
    expect(stderr).toBe('')
    expect(code).toBe(0)
  })
})

describe.skipIf(!redisAvailable)('early refresh without L1', () => {
  it('refreshes from the Redis hit path too', async () => {
    const server = await startRedis()
    const redis = server.client()
    const cache = createCache({ redis, ttl: 2_000, earlyRefresh: 0.5, l1: false })
    let loads = 0
    const loader = async () => ++loads
    await cache.getOrLoad('k', loader)
    await sleep(1_100) // past 50% of ttl, still fresh (by ~900 ms)
    expect(await cache.getOrLoadResult('k', loader)).toEqual({ value: 1, outcome: 'hit' })
    const deadline = Date.now() + 5_000
    while (loads < 2 && Date.now() < deadline) await sleep(10)
    expect(loads).toBe(2)
    await cache.close()
    redis.disconnect()
    await server.stop()
  })
})
