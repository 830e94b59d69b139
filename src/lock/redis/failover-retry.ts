import { RedisUnavailableError } from '../../errors.js'
import { delay, nextBackoff } from '../../timers.js'
import { FIRST_POLL_MS, MAX_POLL_MS } from '../waiting.js'

/**
 * Replies a node sends while its shard fails over or its primary changes: the cluster
 * electing (CLUSTERDOWN), a slot moving (MOVED, ASK, TRYAGAIN), a demoted or resyncing
 * node (READONLY, LOADING, MASTERDOWN), too few replicas for min-replicas-to-write.
 */
const FAILOVER_REPLY = /^(CLUSTERDOWN|TRYAGAIN|MOVED|ASK|READONLY|LOADING|MASTERDOWN|NOREPLICAS)\b/

/**
 * Is this failure one a failover causes and ends? Every `RedisUnavailableError` but those a
 * server answered with another error reply (ACL, OOM, a script error): timeouts, a
 * connection closed, reset or refused, a client still reconnecting, ioredis' redirection
 * limit ("Too many Cluster redirections") or slot refresh failing, and FAILOVER_REPLY.
 */
export function isFailoverError(error: unknown): boolean {
  if (!(error instanceof RedisUnavailableError)) return false
  const cause = error.cause as { name?: string; message?: string } | undefined
  return cause?.name !== 'ReplyError' || FAILOVER_REPLY.test(String(cause.message))
}

/**
 * Runs `attempt`, and on a client that can fail over (Cluster, Sentinel) retries it while
 * it fails with a failover's error (see isFailoverError): backed off from FIRST_POLL_MS,
 * doubling up to MAX_POLL_MS, jittered below it (nextBackoff), and only while the pause still ends before
 * `deadline` (`performance.now()` ms): past it the last error is thrown, so an acquisition
 * never runs past its `wait` for a failover. `onRetry` runs before each retry (the attempt
 * that failed may still run on the server: its owner must not be reused). Resolves
 * `undefined` when `signal` aborts meanwhile.
 */
export async function retryThroughFailover<T>(
  attempt: () => Promise<T>,
  options: { failsOver: boolean; deadline: number; signal: AbortSignal; onRetry(): void },
): Promise<T | undefined> {
  let pauseMs = FIRST_POLL_MS
  for (;;) {
    try {
      return await attempt()
    } catch (error) {
      if (!options.failsOver || !isFailoverError(error) || performance.now() + pauseMs >= options.deadline) throw error
      options.onRetry()
    }
    const pause = delay(pauseMs)
    const onAbort = () => pause.cancel()
    options.signal.addEventListener('abort', onAbort, { once: true })
    try {
      await pause.promise
    } finally {
      options.signal.removeEventListener('abort', onAbort)
    }
    if (options.signal.aborted) return undefined
    pauseMs = nextBackoff(pauseMs, MAX_POLL_MS)
  }
}
