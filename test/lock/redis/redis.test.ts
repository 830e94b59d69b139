/**
 * The lock API on the Redis backend, in one process against a real redis-server: the
 * front's behaviour (await using, tryAcquire, reentrancy, close, typed errors) and the
 * backend's robustness (tokens across expiry and restarts, planted keys, outages,
 * abandoned attempts).
 */
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import {
  createLocks,
  InvalidArgumentError,
  LockBusyError,
  LocksClosedError,
  RedisUnavailableError,
} from '../../../src/index.js'
import { useRedisLocks } from '../../support/lock-suite.js'
import { redisAvailable, startRedis } from '../../support/redis.js'
import { gate, until } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('Redis lock: API', () => {
  const { locks, redis } = useRedisLocks('api')

  it('withLock runs fn with a token and releases after it settles', async () => {
    const seen: bigint[] = []
    const value = await locks().withLock('a', async ({ key, token, signal }) => {
      expect(key).toBe('a')
      expect(signal.aborted).toBe(false)
      expect(await redis().exists('api:{l:a}:lock')).toBe(1)
      seen.push(token)
      return 42
    })
    expect(value).toBe(42)
    expect(await redis().exists('api:{l:a}:lock')).toBe(0)
    await locks().withLock('a', ({ token }) => void seen.push(token))
    expect(seen[1]!).toBeGreaterThan(seen[0]!)
  })

  it('releases when fn throws, and rethrows its error', async () => {
    await expect(locks().withLock('throws', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom')
    expect(await redis().exists('api:{l:throws}:lock')).toBe(0)
  })

  it('await using releases at the end of the block', async () => {
    {
      await using held = await locks().acquire('scoped')
      expect(held.token).toBeTypeOf('bigint')
      expect(await redis().exists('api:{l:scoped}:lock')).toBe(1)
    }
    expect(await redis().exists('api:{l:scoped}:lock')).toBe(0)
  })

  it('tryAcquire: undefined when busy, at once; a wait that runs out is LockBusyError with how long it waited', async () => {
    const held = await locks().acquire('busy')
    const startedAt = performance.now()
    expect(await locks().tryAcquire('busy')).toBeUndefined()
    expect(performance.now() - startedAt).toBeLessThan(1_000)
    const error = await locks()
      .acquire('busy', { wait: 150 })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(LockBusyError)
    expect((error as LockBusyError).waitedMs).toBeGreaterThanOrEqual(140)
    expect((error as LockBusyError).code).toBe('ERR_SG_LOCK_BUSY')
    await held.release()
    const again = await locks().tryAcquire('busy')
    expect(again).toBeDefined()
    await again!.release()
  })

  it('reentrant: a nested withLock on the same key in the same call chain runs at once under the outer lock', async () => {
    const tokens: bigint[] = []
    await locks().withLock('re', async ({ token }) => {
      tokens.push(token)
      await locks().withLock('re', async ({ token: inner }) => void tokens.push(inner), { reentrant: true, wait: 0 })
      expect(await redis().exists('api:{l:re}:lock')).toBe(1) // the inner call did not release it
    })
    expect(tokens[0]).toBe(tokens[1])
    expect(await redis().exists('api:{l:re}:lock')).toBe(0)
  })

  it('not reentrant by default: the nested call waits for itself and gives up with LockBusyError', async () => {
    await locks().withLock('nre', async () => {
      await expect(locks().withLock('nre', async () => 'never', { wait: 100 })).rejects.toBeInstanceOf(LockBusyError)
    })
  })

  it('reentrancy is per call chain: a caller outside it still finds the lock busy', async () => {
    const open = gate()
    // Started before withLock, so its continuation runs outside withLock's call chain.
    const outside = (async () => {
      await open.promise
      return locks().tryAcquire('chain', { reentrant: true })
    })()
    await locks().withLock('chain', async () => {
      open.open()
      expect(await outside).toBeUndefined()
    })
  })

  it('extend keeps the lock past its lease; a signal aborts the wait with its reason', async () => {
    const held = await locks().acquire('ext', { lease: 200 })
    await held.extend('5s')
    expect(await redis().pttl('api:{l:ext}:lock')).toBeGreaterThan(1_000)
    const controller = new AbortController()
    const waiting = locks().acquire('ext', { wait: '30s', signal: controller.signal })
    controller.abort(new Error('caller gave up'))
    await expect(waiting).rejects.toThrow('caller gave up')
    await held.release()
  })
})

describe('Redis lock: bad input gets typed errors', () => {
  const redis = new Redis({ lazyConnect: true })
  const locks = createLocks({ redis, namespace: 'bad' })
  const argumentOf = async (call: () => unknown) => {
    try {
      await call()
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidArgumentError)
      return (error as InvalidArgumentError).argument
    }
    throw new Error('expected an InvalidArgumentError')
  }

  it('keys', async () => {
    expect(await argumentOf(() => locks.acquire(''))).toBe('key')
    expect(await argumentOf(() => locks.acquire(42 as never))).toBe('key')
    expect(await argumentOf(() => locks.tryAcquire('lone \uD800 surrogate'))).toBe('key')
    expect(await argumentOf(() => locks.withLock('x'.repeat(1025), async () => {}))).toBe('key')
  })

  it('lease and wait', async () => {
    expect(await argumentOf(() => locks.acquire('k', { lease: 0 }))).toBe('lease')
    expect(await argumentOf(() => locks.acquire('k', { lease: 10 }))).toBe('lease')
    expect(await argumentOf(() => locks.acquire('k', { lease: '30d' }))).toBe('lease')
    expect(await argumentOf(() => locks.acquire('k', { lease: 'soon' }))).toBe('lease')
    expect(await argumentOf(() => locks.acquire('k', { wait: -1 }))).toBe('wait')
    expect(await argumentOf(() => locks.acquire('k', { wait: Number.NaN }))).toBe('wait')
    expect(await argumentOf(() => locks.acquire('k', { wait: 2 ** 31 }))).toBe('wait')
    expect(await argumentOf(() => locks.tryAcquire('k', { wait: 10 } as never))).toBe('wait')
    expect(await argumentOf(() => locks.acquire('k', { leese: 10 } as never))).toBe('leese')
    expect(await argumentOf(() => locks.withLock('k', 'not a function' as never))).toBe('fn')
  })

  it('createLocks', async () => {
    expect(await argumentOf(() => createLocks({}))).toBe('backend')
    expect(await argumentOf(() => createLocks({ redis, redlock: [redis] }))).toBe('backend')
    expect(await argumentOf(() => createLocks({ redis: {} as never }))).toBe('redis')
    expect(await argumentOf(() => createLocks({ redlock: [redis, redis] }))).toBe('redlock')
    expect(await argumentOf(() => createLocks({ redis, lease: '1y' }))).toBe('lease')
    expect(await argumentOf(() => createLocks({ redis, commandTimeout: -5 }))).toBe('commandTimeout')
    expect(await argumentOf(() => createLocks({ redis, colour: 'red' } as never))).toBe('colour')
    redis.disconnect()
  })
})

describe.skipIf(!redisAvailable)('Redis lock: robustness', () => {
  it('tokens keep increasing after the counter expired and after Redis restarted empty', async () => {
    const server = await startRedis()
    const redis = server.client({ maxRetriesPerRequest: 1 })
    const locks = createLocks({ redis, namespace: 'tok' })
    const tokenNow = () => locks.withLock('t', ({ token }) => token)
    const first = await tokenNow()
    await redis.del('tok:{l:t}') // the counter expired
    const second = await tokenNow()
    expect(second).toBeGreaterThan(first)
    await server.kill()
    await server.restart() // empty
    await until(() => redis.status === 'ready', 'the client to reconnect')
    const third = await tokenNow()
    expect(third).toBeGreaterThan(second)
    await locks.close()
    await server.stop()
  })

  it('a planted lock without an expiry gets one, and a foreign type in its place is replaced', async () => {
    const server = await startRedis()
    const redis = server.client()
    const locks = createLocks({ redis, namespace: 'planted' })
    await redis.set('planted:{l:p}:lock', 'nobody:1') // no TTL: would block forever
    expect(await locks.tryAcquire('p', { lease: 300 })).toBeUndefined()
    expect(await redis.pttl('planted:{l:p}:lock')).toBeGreaterThan(0)
    const held = await locks.acquire('p', { lease: 300, wait: '10s' })
    await held.release()
    await redis.hset('planted:{l:h}:lock', 'x', '1')
    await redis.hset('planted:{l:h}', 'x', '1')
    const replaced = await locks.tryAcquire('h')
    expect(replaced).toBeDefined()
    await replaced!.release()
    await locks.close()
    await server.stop()
  })

  it('a planted token counter (garbage, no expiry, or further ahead than any token) restarts from the server clock; tokens rise from there', async () => {
    const server = await startRedis()
    const redis = server.client()
    const locks = createLocks({ redis, namespace: 'counter' })
    const micros = async () => {
      const [seconds, us] = await redis.time()
      return BigInt(seconds!) * 1_000_000n + BigInt(us!)
    }
    for (const planted of ['abc', '1e400', '9223372036854775807', '-5', '9000000000000000']) {
      await redis.set('counter:{l:c}', planted)
      const before = await micros()
      const first = await locks.withLock('c', ({ token }) => token)
      expect(first, planted).toBeGreaterThanOrEqual(before)
      expect(first, planted).toBeLessThan(before + 3_600_000_000n) // not continued from a planted 9e15
      expect(await redis.pttl('counter:{l:c}')).toBeGreaterThan(0)
      expect(await locks.withLock('c', ({ token }) => token)).toBeGreaterThan(first)
    }
    await locks.close()
    await server.stop()
  })

  it('runOnce: a planted claim without an expiry ends after lockAtMostFor instead of blocking the job for ever', async () => {
    const server = await startRedis()
    const redis = server.client()
    const locks = createLocks({ redis, namespace: 'claims' })
    await redis.set('claims:{o:job}', 'someone|1') // no TTL
    expect(await locks.runOnce('job', () => 1, { lockAtMostFor: 300 })).toEqual({ ran: false })
    expect(await redis.pttl('claims:{o:job}')).toBeGreaterThan(0)
    await until(
      async () => (await locks.runOnce('job', () => 2, { lockAtMostFor: 300 })).ran,
      'the planted claim to end',
      5_000,
    )
    await locks.close()
    await server.stop()
  })

  it('Redis down: acquire fails fast with RedisUnavailableError, never hangs, never LockBusyError', async () => {
    const server = await startRedis()
    const redis = server.client({ maxRetriesPerRequest: 1 })
    const locks = createLocks({ redis, namespace: 'down', commandTimeout: 500 })
    await locks.withLock('k', () => {})
    await server.kill()
    const startedAt = performance.now()
    const error = await locks.acquire('k', { wait: '30s' }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RedisUnavailableError)
    expect(performance.now() - startedAt).toBeLessThan(5_000)
    await locks.close()
    redis.disconnect()
  })

  it('an attempt abandoned while Redis hung does not leave a lock nobody owns (issue 10 item 1)', async () => {
    const server = await startRedis()
    const redis = server.client()
    const check = server.client()
    const locks = createLocks({ redis, namespace: 'abandoned', commandTimeout: 200 })
    await locks.withLock('k', () => {}) // scripts loaded, connection ready
    server.pause() // SIGSTOP: the acquire script waits in the socket
    const error = await locks.acquire('k', { lease: '30s' }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RedisUnavailableError)
    server.resume() // Redis now runs the late acquire, then the release queued behind it
    await until(
      async () => (await check.exists('abandoned:{l:k}:lock')) === 0,
      'the orphaned lock to be released',
      5_000,
    )
    const held = await locks.tryAcquire('k')
    expect(held).toBeDefined() // not blocked for the 30 s lease
    await held!.release()
    await locks.close()
    await server.stop()
  })

  it('close(): waits in progress end with LocksClosedError, held locks lose their signal and are released, new calls are refused', async () => {
    const server = await startRedis()
    const redis = server.client()
    const locks = createLocks({ redis, namespace: 'closing' })
    const held = await locks.acquire('k')
    // Observed at once: the wait may end (rejected) before close() resolves.
    const waiting = locks.acquire('k', { wait: '30s' }).then(
      () => 'acquired',
      (error: unknown) => error,
    )
    await new Promise((resolve) => setTimeout(resolve, 50))
    await locks.close()
    expect(await waiting).toBeInstanceOf(LocksClosedError)
    expect(held.signal.aborted).toBe(true)
    expect(await redis.exists('closing:{l:k}:lock')).toBe(0)
    await expect(locks.acquire('k')).rejects.toBeInstanceOf(LocksClosedError)
    await server.stop()
  })
})
