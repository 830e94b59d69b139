import type { OneKeyLockBackend } from '../one-key-lock.js'

/** Who leads an election: the candidate's `id` and its `term` (its fencing token). */
export interface Leader {
  readonly id: string
  readonly term: bigint
}

/** News that the leader may have changed; a reader re-reads the store after each. */
export interface LeaderFeed {
  /** Resolves on news, or after `timeoutMs` without any. */
  next(timeoutMs: number): Promise<void>
  close(): void
}

/** What the store says now: the leader (or none), and how long until it could end by itself without news. */
export interface LeaderReading {
  readonly leader: Leader | undefined
  /** ms until the leader's lease or session could run out without a message (`Infinity`: a watch reports it). */
  readonly recheckInMs: number
}

/**
 * A backend's part of leader election (Redis, etcd, ZooKeeper). Campaigning is a lock
 * held for as long as the candidate leads, taken through `candidates`: a lock backend of
 * the same store in a namespace of its own (`<namespace>:election`), so an election never
 * shares a name with a lock. The lock's token is the term; the candidate's id is stored
 * with it (`AcquireRequest.label`), which is what `read` reports.
 */
export interface ElectionStore {
  readonly candidates: OneKeyLockBackend<unknown>
  /** Tells observers at once that `name` has a new leader (Redis publishes; watch-based stores need not). */
  announce?(name: string): Promise<void>
  /** Subscribes to news about `name`'s leader: call before `read`, so no change falls in between. */
  feed(name: string): Promise<LeaderFeed>
  /** The current leader of `name`, read from the store. Rejects with the backend's typed error. */
  read(name: string, feed: LeaderFeed): Promise<LeaderReading>
  close(): Promise<void>
}
