import type { Cluster, Redis } from 'ioredis'
import { RedisUnavailableError } from '../../errors.js'
import { withTimeout } from '../../timers.js'

/** Errors of commands that got no answer in time on a connected client (see `timedOut`). */
const TIMED_OUT = new WeakSet<object>()

/**
 * Whether `error` is a `boundedRedisCall` that timed out: the connection was up but no
 * answer came in time (a slow server or a starved process), which is not an outage.
 * @internal
 */
export function timedOut(error: unknown): boolean {
  return typeof error === 'object' && error !== null && TIMED_OUT.has(error)
}

/** ioredis states in which a command would only sit in the offline queue. */
const OFFLINE = new Set(['reconnecting', 'close', 'end'])

/**
 * Runs one command against a lock backend's Redis, bounded by `timeoutMs` whatever the
 * client's own settings, failing at once when the connection is known to be down. Every
 * failure is a `RedisUnavailableError`.
 * @internal
 */
export async function boundedRedisCall<T>(
  client: Redis | Cluster,
  timeoutMs: number,
  operation: string,
  command: () => Promise<T>,
): Promise<T> {
  if (OFFLINE.has(client.status))
    throw new RedisUnavailableError(`redis ${operation} skipped: connection is ${client.status}`)
  try {
    return await withTimeout(command(), timeoutMs, () => {
      const error = new RedisUnavailableError(`redis ${operation} timed out after ${timeoutMs} ms`)
      TIMED_OUT.add(error)
      return error
    })
  } catch (error) {
    throw error instanceof RedisUnavailableError
      ? error
      : new RedisUnavailableError(`redis ${operation} failed: ${(error as Error)?.message}`, error)
  }
}
