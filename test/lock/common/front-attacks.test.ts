/**
 * Attacks on the lock front (locks.ts, handle.ts) that found defects, on the Redis
 * backend against a real redis-server. Each test here failed before its fix.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createLocks, InvalidArgumentError, LockLostError, type Locks } from '../../../src/index.js'
import { redisAvailable, startRedis, type RedisServer } from '../../support/redis.js'
import { useRedisLocks } from '../../support/lock-suite.js'
import { gate } from '../../support/timing.js'

describe.skipIf(!redisAvailable)('lock front under attack (Redis)', () => {
  const { locks } = useRedisLocks('attack')

  it('reentrant: a detached nested call that outlives the outer withLock has its signal aborted with LockLostError when the outer releases', async () => {
    const innerEntered = gate()
    const outerReleased = gate()
    let innerSignal: AbortSignal | undefined
    let detached: Promise<unknown> | undefined
    await locks().withLock('detached', async () => {
      // Not awaited: inherits the AsyncLocalStorage chain, so it enters under the outer lock.
      detached = locks().withLock(
        'detached',
        async ({ signal }) => {
          innerSignal = signal
          innerEntered.open()
          await outerReleased.promise
        },
        { reentrant: true, wait: 0 },
      )
      await innerEntered.promise
    })
    // The outer call released the lock: someone else can take it now...
    const other = await locks().tryAcquire('detached')
    expect(other).toBeDefined()
    // ...so the nested call still running no longer holds anything and must be told.
    expect(innerSignal!.aborted).toBe(true)
    expect(innerSignal!.reason).toBeInstanceOf(LockLostError)
    outerReleased.open()
    await detached
    await other!.release()
  })

  it('reentrant: a nested acquire() handle kept past the outer release reports the loss on its signal', async () => {
    let nested: Awaited<ReturnType<Locks['acquire']>> | undefined
    await locks().withLock('kept', async () => {
      nested = await locks().acquire('kept', { reentrant: true })
      expect(nested.signal.aborted).toBe(false)
    })
    expect(nested!.signal.aborted).toBe(true)
    expect(nested!.signal.reason).toBeInstanceOf(LockLostError)
    await expect(nested!.extend()).rejects.toBeInstanceOf(LockLostError)
  })
})

describe.skipIf(!redisAvailable)('null is a wrong type, not "unset"', () => {
  let server: RedisServer
  beforeAll(async () => (server = await startRedis()))
  afterAll(async () => server?.stop())

  it.each(['lease', 'wait', 'reentrant', 'maxKeyLength', 'namespace', 'commandTimeout'])(
    'createLocks({ %s: null }) is InvalidArgumentError naming it',
    (option) => {
      const redis = server.client()
      let error: unknown
      try {
        void createLocks({ redis, [option]: null } as never).close()
      } catch (thrown) {
        error = thrown
      }
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect((error as InvalidArgumentError).argument).toBe(option)
    },
  )

  it('runOnce({ lockAtLeastFor: null }) is InvalidArgumentError naming it', async () => {
    const locks = createLocks({ redis: server.client() })
    await expect(
      locks.runOnce('null-at-least', () => 1, { lockAtMostFor: 1_000, lockAtLeastFor: null } as never),
    ).rejects.toMatchObject({ argument: 'lockAtLeastFor' })
    await locks.close()
  })
})
