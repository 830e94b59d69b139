import type { LockNames } from './keys.js'
import type { ClientWith } from './scripts.js'

/** What releaseAbandoned needs of a client: the release script, and whether it is a Cluster (and its retry options). */
type AbandonClient = ClientWith<'stampedeGuardLockRelease'> & {
  readonly isCluster?: boolean
  readonly options?: {
    maxRedirections?: number
    retryDelayOnFailover?: number
    retryDelayOnClusterDown?: number
    retryDelayOnTryAgain?: number
    slotsRefreshTimeout?: number
  }
}

/** The first repeat of a Cluster's release behind an abandoned attempt, in ms; each next one waits twice as long. */
const FIRST_REPEAT_MS = 250

/**
 * An attempt to take a lock that got no answer (it timed out, or its connection dropped) is
 * not over: Redis may still run it, from its backlog after a stall, or because ioredis
 * resends unanswered commands after a reconnect, and would then hold a lock for a whole
 * lease that nobody releases or renews. This queues a compare-and-delete for that owner
 * (release-owner.lua) right behind it, on the same client: commands of one connection run
 * in order, so whenever the attempt runs, the release runs after it. `owner` must be new
 * for each attempt that may be abandoned, or at least not reused once a later attempt won:
 * the release would take that lock too. It is sent past any budget or breaker (it must
 * queue behind the attempt), never waited for, and its failure is nobody's: if the
 * connection is gone for good, so is what it queued.
 *
 * A Cluster client breaks "behind it": an attempt whose node connection closed waits in
 * ioredis' retry queue for a slot refresh, while the release, sent later, may go straight
 * to the promoted replica and overtake it (a lock then sat out its lease after a failover).
 * So on a Cluster the release is sent again, at 250 ms, then twice as long each time, until
 * ioredis' own retries of the attempt are over (maxRedirections × (the longest retry delay
 * + slotsRefreshTimeout)). The owner is never reused, so a repeat can only free the
 * abandoned attempt's own lock.
 * @internal
 */
export function releaseAbandoned(client: AbandonClient, keys: LockNames, owner: string): void {
  const release = () => client.stampedeGuardLockRelease(keys.lock, keys.channel, `${owner}:`, 0).catch(() => {})
  void release()
  if (client.isCluster !== true) return
  const window = clusterResendWindowMs(client.options ?? {})
  for (let at = FIRST_REPEAT_MS, previous = 0; previous < window; previous = at, at *= 2)
    setTimeout(release, Math.min(at, window)).unref()
}

/** How long ioredis Cluster may go on resending one command: every redirection, each after its delay and a slot refresh. */
function clusterResendWindowMs(options: NonNullable<AbandonClient['options']>): number {
  const delay = Math.max(
    options.retryDelayOnFailover ?? 100,
    options.retryDelayOnClusterDown ?? 100,
    options.retryDelayOnTryAgain ?? 100,
  )
  return (options.maxRedirections ?? 16) * (delay + (options.slotsRefreshTimeout ?? 1_000))
}
