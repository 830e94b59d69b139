import type { HeldLock } from '../one-key-lock.js'

/**
 * What a backend implements to offer `locks.semaphore()`: a counting semaphore whose permits
 * are leased like a lock's (or bound to a session), taken in FIFO order. The front validates
 * everything before calling it (`name` like a key, `count` in 1..`permits`, durations in
 * whole ms), so a store sees no raw user input.
 */
export interface SemaphoreRequest {
  /** The semaphore's name, validated like a lock key. */
  readonly name: string
  /** Size of the semaphore: at most this many permits are held at once, in 1..`MAX_PERMITS`. */
  readonly permits: number
  /** Permits this acquisition takes at once, in 1..`permits`. */
  readonly count: number
  /** Lease of each permit, ms (renewed by the front's watchdog for `'lease'` stores). */
  readonly leaseMs: number
  /** How long to wait in line, ms; `0`: one attempt, and the caller does not join the line. */
  readonly waitMs: number
  /** Aborted when the caller gives up: leave the line, take nothing. */
  readonly signal: AbortSignal
}

/** Permits a store holds for the caller: a `HeldLock` (its `token` is the first of `tokens`). */
export interface HeldPermits extends HeldLock<void> {
  /** One fencing token per permit, ascending, never repeated for this semaphore. */
  readonly tokens: readonly bigint[]
}

export interface SemaphoreStore {
  /**
   * Takes `count` permits, waiting in line up to `waitMs`: FIFO, so a request for many is
   * not starved by a stream of small ones. `undefined` when the wait ran out (or with no
   * wait, when they were not free at once). Rejects with the backend's typed error when the
   * store failed; never hangs. Its `release()` rejects with `LockLostError` when any of the
   * permits had expired before it (someone else may have had them): lost, not released.
   */
  acquire(request: SemaphoreRequest): Promise<HeldPermits | undefined>
}

/** Largest semaphore: each permit is one record in the store while held. */
export const MAX_PERMITS = 10_000

/** Consecutive tokens from `first`. */
export function tokensFrom(first: bigint, count: number): bigint[] {
  return Array.from({ length: count }, (_, i) => first + BigInt(i))
}

/**
 * Tokens for a holder whose store issues one number per holder (etcd's `create_revision`,
 * ZooKeeper's `czxid`): `number × MAX_PERMITS + i`, so they are distinct per permit and still
 * strictly increasing from holder to holder.
 */
export function tokensOfHolder(number: bigint, count: number): bigint[] {
  return tokensFrom(number * BigInt(MAX_PERMITS), count)
}
