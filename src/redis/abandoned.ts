import type { LockNames } from './keys.js'
import type { ClientWith } from './scripts.js'

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
 * @internal
 */
export function releaseAbandoned(client: ClientWith<'stampedeGuardLockRelease'>, keys: LockNames, owner: string): void {
  client.stampedeGuardLockRelease(keys.lock, keys.channel, `${owner}:`, 0).catch(() => {})
}
