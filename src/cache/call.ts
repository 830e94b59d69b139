import { setMaxListeners } from 'node:events'
import type { Loader } from '../context.js'
import type { Entry } from '../entry.js'
import type { Deadlines } from '../deadlines.js'
import type { Policy } from '../settings.js'
import type { EntryKeys } from './redis/keys.js'

/**
 * How a caller's value was obtained:
 * - `hit`: fresh, from L1 or Redis;
 * - `stale`: a stale value (grace, fail-safe, backoff, or a soft, hard or wait timeout);
 * - `loaded`: this caller's own loader produced it;
 * - `coalesced`: another caller's loader produced it (in this process or another).
 */
export type LoadOutcome = 'hit' | 'stale' | 'loaded' | 'coalesced'

export interface LoadResult<V> {
  value: V
  outcome: LoadOutcome
}

/** What one flight resolves to. `shareable: false` means its followers must run their own loaders. */
export interface Resolution<V = unknown> extends LoadResult<V> {
  shareable: boolean
  /**
   * A value loaded with tags: them, and `deletions` when its load began. A caller that joined
   * the flight after one of them was invalidated must not get it (it may predate the
   * invalidation): it loads again.
   */
  loadedUnder?: { tags: readonly string[]; epoch: number }
}

/** One request as it goes through the cache's parts. */
export interface Call {
  key: string
  loader: Loader<unknown>
  policy: Policy
  /** `deletions` when the call started: a delete after it keeps its result out of L1. */
  epoch: number
  /** A refresh nobody waits for (grace, early refresh). */
  background?: boolean
  /** The call's `tags` option, checked; undefined for none. */
  tags?: readonly string[]
  /** The call's `forceRefresh`: reload even when fresh (see CallOptions.forceRefresh). */
  force?: boolean
}

/** What a flight has learned that its callers' timeouts can use. */
export interface FlightNotes {
  fallback: Entry | undefined
  /**
   * While the flight's first Redis lookup is pending: `true`, or what its joined callers'
   * waitTimeouts do when it answers; `false` once it has.
   */
  lookingUp?: (() => void)[] | boolean
  /** Its callers' softTimeout / hardTimeout / waitTimeout, on one timer (created on first need). */
  deadlines?: Deadlines
}

/**
 * A flight's notes, every field set: `lookingUp`, added later to a `{ fallback }` literal,
 * went to a property array of its own (some 30 B more for each of 20,000 parked waits).
 */
export function newFlightNotes(): FlightNotes {
  return { fallback: undefined, lookingUp: undefined }
}

/**
 * The entry's lock this process holds for one load, and its fencing token; or, after a wait
 * ran out (`lockValue` ''), the bare token alone. Not a run-once claim (src/lock/run-once.ts).
 */
export interface HeldEntryLock {
  keys: EntryKeys
  token: string
  /** '' when loading without the lock (after a wait timeout): nothing to renew or release. */
  lockValue: string
  /** `performance.now()` when the lookup that took the lock was sent: the lease runs from no earlier. */
  lockedAt: number
  /** The server time (ms) of that lookup: the load began no earlier (tags compare it with their invalidations). */
  serverAt?: number
}

/**
 * The signal of loads that hold no lease. Many of them may wait on it at once (for a loader
 * permit, each listening for an abort that never comes): no listener cap, so no warning.
 */
export const NEVER_ABORTED = new AbortController().signal
setMaxListeners(0, NEVER_ABORTED)
/** A channel message's kind, its first byte: 'c' commit, 'e' loader error, 'u' uncacheable (messages are Buffers). */
export const messageKind = (message: Buffer): string => String.fromCharCode(message[0] ?? 0)
