/**
 * The Redis lock backend's retry through a failover (src/lock/redis/failover-retry.ts):
 * which errors it retries, and that it never pauses past the caller's wait. The errors are
 * built as ioredis delivers them (its ReplyError, wrapped as boundedRedisCall does);
 * the failovers themselves are in redis-cluster.test.ts and redis-sentinel.test.ts.
 */
import { ReplyError } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { RedisUnavailableError } from '../../../src/errors.js'
import { isFailoverError, retryThroughFailover } from '../../../src/lock/redis/failover-retry.js'

const wrapped = (cause: unknown) =>
  new RedisUnavailableError(`redis lock acquire failed: ${(cause as Error).message}`, cause)

describe('lock acquisition through a failover', () => {
  it("retries a failover's errors, not another error reply", () => {
    for (const reply of [
      'CLUSTERDOWN The cluster is down',
      'TRYAGAIN Multiple keys request during rehashing of slot',
      'MOVED 3999 127.0.0.1:6381',
      "READONLY You can't write against a read only replica.",
      'LOADING Redis is loading the dataset in memory',
      'MASTERDOWN Link with MASTER is down',
    ]) {
      expect(isFailoverError(wrapped(new ReplyError(reply))), reply).toBe(true)
    }
    expect(
      isFailoverError(wrapped(new Error('Too many Cluster redirections. Last error: Error: Connection is closed.'))),
    ).toBe(true)
    expect(isFailoverError(wrapped(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })))).toBe(true)
    expect(isFailoverError(new RedisUnavailableError('redis lock acquire timed out after 1000 ms'))).toBe(true)
    for (const reply of [
      "NOPERM this user has no permissions to run the 'evalsha' command",
      "OOM command not allowed when used memory > 'maxmemory'.",
      'ERR stampede-guard acquire: lease must be an integer',
    ]) {
      expect(isFailoverError(wrapped(new ReplyError(reply))), reply).toBe(false)
    }
    expect(isFailoverError(new Error('not from Redis'))).toBe(false)
  })

  it('retries with back-off until the next pause would end past the deadline, then throws the last error', async () => {
    const attempts: number[] = []
    const startedAt = performance.now()
    const error = new RedisUnavailableError(
      'redis lock acquire failed: CLUSTERDOWN',
      new ReplyError('CLUSTERDOWN The cluster is down'),
    )
    let retries = 0
    await expect(
      retryThroughFailover(
        async () => {
          attempts.push(performance.now() - startedAt)
          throw error
        },
        { failsOver: true, deadline: startedAt + 600, signal: new AbortController().signal, onRetry: () => retries++ },
      ),
    ).rejects.toBe(error)
    const took = performance.now() - startedAt
    // No pause past the deadline: the next one (≥ 168 ms) would end past it. The slack is
    // timer lateness on a loaded box, well under that pause.
    expect(took).toBeLessThan(600 + 150)
    expect(attempts.length).toBeGreaterThanOrEqual(3) // 50, ~100, ~200 ms pauses fit in 600 ms
    // Backed off: pauses of at least 50, 75, 112, 168 ms (doubling, jittered down ≤ 25 %) fit at most
    // 5 attempts in 600 ms; a steady 50 ms poll would make 12. Timer lateness only lowers the count.
    expect(attempts.length).toBeLessThanOrEqual(5)
    expect(retries).toBe(attempts.length - 1)
  })

  it('resolves the attempt once it succeeds; no retry on a client that cannot fail over, nor with no wait', async () => {
    let calls = 0
    const flaky = async () => {
      if (++calls < 3) throw new RedisUnavailableError('redis lock acquire timed out after 1000 ms')
      return 'taken'
    }
    const signal = new AbortController().signal
    expect(
      await retryThroughFailover(flaky, {
        failsOver: true,
        deadline: performance.now() + 5_000,
        signal,
        onRetry: () => {},
      }),
    ).toBe('taken')
    expect(calls).toBe(3)
    calls = 0
    await expect(
      retryThroughFailover(flaky, { failsOver: false, deadline: performance.now() + 5_000, signal, onRetry: () => {} }),
    ).rejects.toBeInstanceOf(RedisUnavailableError)
    expect(calls).toBe(1)
    calls = 0
    await expect(
      retryThroughFailover(flaky, { failsOver: true, deadline: performance.now(), signal, onRetry: () => {} }),
    ).rejects.toBeInstanceOf(RedisUnavailableError)
    expect(calls).toBe(1)
  })

  it('stops at once, taking nothing, when the caller aborts during a pause', async () => {
    const controller = new AbortController()
    let calls = 0
    const startedAt = performance.now()
    setTimeout(() => controller.abort(), 120)
    const result = await retryThroughFailover(
      async () => {
        calls++
        throw new RedisUnavailableError('redis lock acquire skipped: connection is reconnecting')
      },
      { failsOver: true, deadline: performance.now() + 10_000, signal: controller.signal, onRetry: () => {} },
    )
    expect(result).toBeUndefined()
    expect(performance.now() - startedAt).toBeLessThan(3_000) // aborted at 120 ms; the wait is 10 s
    expect(calls).toBeGreaterThanOrEqual(2)
  })
})
