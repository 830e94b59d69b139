/**
 * The contract every lock backend implements: Redis, Redlock, PostgreSQL, MariaDB/MySQL,
 * etcd and ZooKeeper. The front (`createLocks`, `withLock`, `acquire`, `tryAcquire`,
 * `runOnce`, the decorator) is written once on top of it, so option parsing, key
 * validation, reentrancy, the lease watchdog, `await using` and the typed errors are
 * shared; a backend only knows how to take, keep and give back one lock in its store.
 *
 * A backend never sees a raw user option: the front validates keys (non-empty, at most
 * `maxKeyLength`, well-formed UTF-16) and turns durations into whole milliseconds within
 * Node's timer range (1 .. 2^31 − 1) before calling it.
 */

import type { SemaphoreStore } from './semaphore/contract.js'

/**
 * How a held lock stays held.
 * - `'lease'`: it expires after `leaseMs` unless renewed (Redis, Redlock). The front runs
 *   the shared watchdog: `renew()` every lease/3 from acquisition, and the local abort at
 *   `last renewal sent + lease − margin` whatever the renewal is doing.
 * - `'session'`: the backend keeps it alive itself for as long as a connection, a
 *   session or a store-side lease lives (PostgreSQL, MariaDB, etcd keep-alive,
 *   ZooKeeper session), and aborts `signal` when that ends. The front runs no watchdog.
 */
export type Liveness = 'lease' | 'session'

/** One acquisition attempt, as the front hands it to a backend. */
export interface AcquireRequest {
  /** The user's key, already validated. The backend maps it into its own namespace. */
  readonly key: string
  /** Lease length in ms. Session-bound backends use it only where their store needs a bound (an etcd lease TTL). */
  readonly leaseMs: number
  /**
   * How long to wait while the lock is busy, in ms; `0` means one attempt, no waiting.
   * Waiting must be by notification (pub/sub, a watch, a blocking call with a timeout)
   * with at most a bounded, backed-off poll as the safety net, never a tight loop.
   */
  readonly waitMs: number
  /** Aborted when the caller gives up (its own AbortSignal, or `close()`): stop waiting, take nothing. */
  readonly signal: AbortSignal
  /**
   * Waiters are served in the order they started waiting (the `fair` option). Sent only
   * to a backend whose `fifo` is `'optional'`; `'always'` backends are FIFO anyway.
   */
  readonly fair?: boolean
}

/** A lock the backend holds on the caller's behalf. */
export interface HeldLock<Resource = void> {
  /**
   * The fencing token: strictly increasing per key across every holder, and never
   * repeated, even after the lock's own record expired. `undefined` for a backend that
   * cannot issue one honestly (Redlock): the front then throws `FencingUnsupportedError`
   * when the token is read.
   */
  readonly token: bigint | undefined
  /** See {@link Liveness}. */
  readonly liveness: Liveness
  /**
   * `performance.now()` when the attempt that took the lock was *sent* (`'lease'`
   * backends): the store started the lease no earlier, so the watchdog's local deadline
   * (`this + lease − margin`) can never be late. When absent the front uses the moment
   * `acquire` resolved, which is later by one round trip: set it.
   */
  readonly acquiredAt?: number
  /**
   * Aborted with a `LockLostError` as soon as the backend knows the lock is gone
   * (connection or session lost, lease expired, taken over). Never aborted by `release()`.
   */
  readonly signal: AbortSignal
  /**
   * What the critical section works with, when the backend has one: the PostgreSQL
   * transaction's client (so writes commit with the lock held), owner-checked etcd
   * writes, … `undefined` otherwise.
   */
  readonly resource: Resource
  /**
   * Extends the lease to `leaseMs` from now (`'lease'` backends; the watchdog calls it).
   * Resolves `true` when extended, `false` when the lock is no longer ours (the front then
   * aborts with `LockLostError`); rejects with a backend error when the store could not be
   * reached. A lost lock is never re-acquired by an extension.
   * `'session'` backends resolve `true` while they still hold it.
   */
  renew(leaseMs: number): Promise<boolean>
  /**
   * `'session'` backends that confirm their session or lease by a local deadline (etcd,
   * ZooKeeper): ms left before it, by the monotonic clock, 0 once lost. The front's
   * `validForMs` / `assertHeld()` read it; absent, a session lock counts as valid until
   * `signal` aborts. (`'lease'` backends need not: the front's watchdog knows.)
   */
  validForMs?(): number
  /**
   * Gives the lock back. Idempotent, and never removes another holder's lock (compare
   * and delete). Rejects with a backend error when the store could not be told (the lock
   * then ends by itself with its lease or session), or when the critical section's work
   * held in `resource` was not kept (a transaction that did not commit).
   *
   * `failure`: what the critical section threw, when it threw (`withLock` passes it). A
   * transactional backend (PostgreSQL) then rolls back instead of committing. Other
   * backends ignore it.
   */
  release(failure?: unknown): Promise<void>
}

/**
 * A run-once claim (ShedLock semantics) for scheduled jobs: no waiting and no renewal,
 * and every deadline computed by the store's clock (Redis `TIME`, PostgreSQL `now()`),
 * never by a node's.
 */
export interface ClaimStore {
  /**
   * Claims `name` until `atMostMs` from now. Resolves `undefined` at once when another
   * instance's claim is still live.
   */
  claim(name: string, atMostMs: number): Promise<Claim | undefined>
}

export interface Claim {
  /**
   * Ends the claim, but keeps it until at least `atLeastMs` after it was taken, so an
   * instance whose timer fires a little late does not run the same tick again.
   */
  finish(atLeastMs: number): Promise<void>
}

export interface LockBackend<Resource = void> {
  /** `'redis'`, `'redlock'`, `'postgres'`, `'mysql'`, `'etcd'`, `'zookeeper'`: used in errors and metrics. */
  readonly name: string
  /**
   * Takes the lock, waiting up to `request.waitMs`. Resolves `undefined` if it was still
   * busy at the deadline (the front turns that into `LockBusyError`). Rejects with a typed
   * backend error (`RedisUnavailableError`, `LockBackendError`) when the store failed:
   * never hangs, whatever the store does (every call has its own bound).
   */
  acquire(request: AcquireRequest): Promise<HeldLock<Resource> | undefined>
  /** Run-once claims, for backends that offer them. */
  readonly claims?: ClaimStore
  /**
   * Whether waiters are served first come, first served: `'always'` (etcd, ZooKeeper: their
   * queue recipes), `'optional'` (Redis: `fair: true` asks for it). Absent: no order is
   * promised, and the front refuses `fair: true` (`InvalidArgumentError`) before sending anything.
   */
  readonly fifo?: 'always' | 'optional'
  /** Counting semaphores (`locks.semaphore()`), for backends that offer them. */
  readonly semaphores?: SemaphoreStore
  /** Stops timers and subscriptions the backend opened. The caller's own clients stay open. */
  close(): Promise<void>
}

/** The `StoreOptions` of a `createLocks` call, resolved: what every shortcut's backend is built with. */
export interface StoreSettings {
  namespace: string
  commandTimeoutMs: number
}

/**
 * How `createLocks({ <option>: value })` builds a backend from what the caller passed: `Value`
 * is the option's type (a client the caller created, or options around one). `create` checks
 * `value` itself, since JavaScript callers may pass anything, and fails with an
 * `InvalidArgumentError` naming the option.
 */
export interface BackendShortcut<Value> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the shortcut's resource type is erased here
  create(value: Value, settings: StoreSettings): LockBackend<any>
}
