import type { CoalesceStore } from './coalesce/store.js'
import type { ElectionStore } from './election/store.js'
import type { OneKeyLockBackend } from './one-key-lock.js'
import type { ReadWriteStore } from './read-write/store.js'
import type { SemaphoreStore } from './semaphore/contract.js'

export type { AcquireRequest, HeldLock, Liveness, MultiAcquireRequest, OneKeyLockBackend } from './one-key-lock.js'

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
  /**
   * Keeps the claim for `atMostMs` from now (the store's clock) while it is still ours and
   * not yet run out (runOnce `keepAlive`). `false` when it is not: never takes it back.
   */
  extend?(atMostMs: number): Promise<boolean>
}

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
 *
 * The one-key part is `OneKeyLockBackend`; the recipes a store may offer are below.
 */
export interface LockBackend<Resource = void> extends OneKeyLockBackend<Resource> {
  /** Run-once claims, for backends that offer them. */
  readonly claims?: ClaimStore
  /** Counting semaphores (`locks.semaphore()`), for backends that offer them. */
  readonly semaphores?: SemaphoreStore
  /** Leader election (`locks.elect`, `locks.observe`), for backends where a leader can step down by its own clock. */
  readonly election?: ElectionStore
  /** Coalesced runs (`locks.coalesce`), for backends that offer them. */
  readonly coalesce?: CoalesceStore
  /** Read-write locks (`locks.readWrite`), for backends that offer them. */
  readonly readWrite?: ReadWriteStore
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
