/**
 * One key's lock, as every backend takes it: the part of the backend contract that the
 * recipes built on a backend (election, read-write) use, apart from the recipes themselves,
 * so that a recipe's store can name a lock backend without importing the contract that names it.
 */

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
  /**
   * Who asks (an election candidate's id): a backend that can store it with the lock does
   * (Redis in the value, etcd as the key's value, ZooKeeper as the node's data), so an
   * observer reading the store can tell who holds it. Validated by the front.
   */
  readonly label?: string
}

/** Several keys at once (`LockBackend.acquireAll`): like `AcquireRequest`, for every key of `keys`. */
export interface MultiAcquireRequest {
  readonly keys: readonly string[]
  readonly leaseMs: number
  readonly waitMs: number
  readonly signal: AbortSignal
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
  /**
   * The `performance.now()` instant until which the store cannot give this lock to anyone
   * else, by this process's monotonic clock (last confirmed renewal sent + lease − margin),
   * for backends whose hold is bounded that way (etcd lease, ZooKeeper session). `'lease'`
   * holds get it from the front's watchdog. Absent for connection-bound locks.
   */
  validUntil?(): number
}

/** A backend's locks on one key at a time: `LockBackend` without the recipes it may offer. */
export interface OneKeyLockBackend<Resource = void> {
  /** `'redis'`, `'redlock'`, `'postgres'`, `'mysql'`, `'etcd'`, `'zookeeper'`: used in errors and metrics. */
  readonly name: string
  /**
   * Takes the lock, waiting up to `request.waitMs`. Resolves `undefined` if it was still
   * busy at the deadline (the front turns that into `LockBusyError`). Rejects with a typed
   * backend error (`RedisUnavailableError`, `LockBackendError`) when the store failed:
   * never hangs, whatever the store does (every call has its own bound).
   */
  acquire(request: AcquireRequest): Promise<HeldLock<Resource> | undefined>
  /**
   * Takes several keys in one step, all or none (`withLocks`), waiting up to `waitMs`:
   * one lock per key, in the order given, or `{ busy }` naming a key still held by another
   * owner at the deadline (nothing taken). Only for the runs `atomicRuns` made. Optional:
   * without it, keys are taken one by one.
   */
  acquireAll?(request: MultiAcquireRequest): Promise<HeldLock<Resource>[] | { busy: string }>
  /**
   * Splits keys in canonical order into runs of consecutive keys that `acquireAll` takes in
   * one step (Redis: keys of one slot). Consecutive only: taking a later key together with
   * an earlier one before a key between them could deadlock against another caller.
   */
  atomicRuns?(keys: readonly string[]): string[][]
  /**
   * Whether waiters are served first come, first served: `'always'` (etcd, ZooKeeper: their
   * queue recipes), `'optional'` (Redis: `fair: true` asks for it). Absent: no order is
   * promised, and the front refuses `fair: true` (`InvalidArgumentError`) before sending anything.
   */
  readonly fifo?: 'always' | 'optional'
  /** Stops timers and subscriptions the backend opened. The caller's own clients stay open. */
  close(): Promise<void>
}
