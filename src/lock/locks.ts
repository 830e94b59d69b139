import { AsyncLocalStorage } from 'node:async_hooks'
import { setMaxListeners } from 'node:events'
import { InvalidArgumentError, LockBusyError, LockLostError, LocksClosedError } from '../errors.js'
import { LocalLine } from './local-line.js'
import { LockTaker } from './taker.js'
import type { LockBackend } from './backend.js'
import { LockEmitter, type LockEventName, type LockEvents, type LockEventSource } from './events.js'
import type { HeldLockHandle, LockContext, LockHandle } from './handle.js'
import {
  parseCallOptions,
  parseDefaults,
  validateKey,
  type LockCallOptions,
  type LockDefaults,
  type LockSettings,
} from './options.js'
import { coalesce, type CoalesceContext, type CoalesceOptions, type CoalesceResult } from './coalesce/coalesce.js'
import { runOnce, type RunOnceContext, type RunOnceOptions, type RunOnceResult } from './run-once.js'
import type { SemaphoreOptions } from './semaphore/options.js'
import type { Semaphore } from './semaphore/semaphore.js'
import type { ReadWriteLock } from './read-write/read-write.js'
import type { MultiLockContext } from './multi/multi.js'
import type { LeaderObserver } from './election/observer.js'
import type { ElectOptions, Leadership } from './election/options.js'
import type { ObserveOptions } from './election/observe-options.js'
import type { LockParts } from './recipes/lock-parts.js'
import { withLocks } from './recipes/with-locks.js'
import { openSemaphore } from './recipes/semaphore.js'
import { openReadWrite } from './recipes/read-write.js'
import { campaign, observeLeader } from './recipes/election.js'

/**
 * Distributed locks over one backend. Every call validates its key and options
 * (`InvalidArgumentError` naming the option), and fails distinctly:
 * `LockBusyError` (held by someone else; with how long it waited), `LockLostError`
 * (on `signal`, when the lease was lost), and the backend's own error
 * (`RedisUnavailableError`, `LockBackendError`) when its store failed.
 * It reports each acquisition's outcome and each hold's end as events (`on()`).
 */
export class Locks<Resource = void> implements LockEventSource {
  private readonly settings: LockSettings
  private readonly events = new LockEmitter()
  private readonly closing = new AbortController()
  // `unknown`/`any` rather than `Resource` keep Locks<void> assignable to Locks<unknown>.
  private readonly live = new Set<LockHandle<unknown>>()
  /** The locks held by the current async call chain, by key (for `reentrant`). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one chain holds handles of every resource type
  private readonly chain = new AsyncLocalStorage<ReadonlyMap<string, LockHandle<any>>>()
  /** Takes locks from the backend, in this process's line of acquisitions per key (see `LocalLine`). */
  private readonly taker: LockTaker<Resource>
  private closed: Promise<void> | undefined
  /** What the recipes (`withLocks`, `semaphore`, `readWrite`, `elect`, `observe`) are built on. */
  private readonly parts: LockParts<Resource>

  constructor(
    private readonly backend: LockBackend<Resource>,
    defaults: LockDefaults = {},
  ) {
    this.settings = parseDefaults(defaults)
    // Every waiter listens on it for as long as it waits (and removes its listener): not a leak.
    setMaxListeners(Infinity, this.closing.signal)
    this.taker = new LockTaker(backend, this.events, this.closing.signal, new LocalLine(), this.live)
    this.parts = {
      backend,
      settings: this.settings,
      closing: this.closing.signal,
      take: (key, settings, route) => this.taker.take(key, settings, route),
      takeAll: (keys, settings) => this.taker.takeAll(keys, settings),
      holding: (held, fn) => this.holding(held, fn),
      heldInChain: (key) => this.heldInChain(key),
    }
  }

  /**
   * Subscribes to a lock event (see {@link LockEvents}: `acquired`, `busy`, `released`,
   * `lost`, `backend-error`); returns the unsubscribe function. With no listener for an
   * event, emitting it costs one array-length check. `instrumentLocks(locks)` from
   * `stampede-guard/otel` turns them into OpenTelemetry metrics and spans.
   */
  on<E extends LockEventName>(event: E, listener: (payload: LockEvents[E]) => void): () => void {
    return this.events.on(event, listener)
  }

  /** The backend's name: `'redis'`, `'redlock'`, … */
  get backendName(): string {
    return this.backend.name
  }

  /**
   * Runs `fn` holding the lock on `key`, and releases it when `fn` settles (after its
   * promise, so a transaction committed inside `fn` is committed before the next holder
   * gets in). Waits up to `wait` for a busy lock, then rejects with `LockBusyError`.
   * Rejects with the backend's error if the release failed after `fn` succeeded (the
   * store could not be told, so the lock lingers until its lease ends; or a transactional
   * backend could not commit `fn`'s work).
   * If the lock is lost meanwhile, `signal` aborts with `LockLostError`, and when `fn`
   * settles `withLock` rejects with that `LockLostError` instead of returning its result
   * (checked with `assertHeld()`, so right even after a pause): what `fn` already did
   * cannot be undone here (a transactional backend rolls it back), so call `assertHeld()`
   * before each side effect, and fence your writes with `token`.
   */
  async withLock<T>(
    key: string,
    fn: (lock: LockContext<Resource>) => T | Promise<T>,
    options?: LockCallOptions,
  ): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `expected a function, got ${typeof fn}`)
    const checkedKey = this.checkKey(key)
    const settings = parseCallOptions(options, this.settings, true)
    const outer = settings.reentrant ? this.heldInChain(checkedKey) : undefined
    if (outer) return fn(outer.nested())
    const handle = await this.taker.take(checkedKey, settings)
    if (!handle) throw new LockBusyError(checkedKey, settings.waitMs) // unreachable: take() throws when waiting
    return this.holding([[checkedKey, handle]], () => fn(handle))
  }

  /**
   * Runs `fn` with `held` in the call chain (by chain key), then releases them all: after
   * `fn`'s promise settles, as a failure when it threw (a transactional backend rolls back).
   */
  private async holding<T>(
    held: readonly (readonly [string, LockHandle<Resource>])[],
    fn: () => T | Promise<T>,
  ): Promise<T> {
    const chain = new Map(this.chain.getStore())
    for (const [key, handle] of held) chain.set(key, handle)
    let result: T
    try {
      result = await this.chain.run(chain, fn)
      // A result computed by a holder that outlived its lease (a pause) is not returned as
      // if it were exclusive: LockLostError, and a transactional backend rolls it back.
      for (const [, handle] of held) handle.assertHeld()
    } catch (error) {
      const failure = error ?? new Error('the critical section threw a nullish value')
      await Promise.all(held.map(([, handle]) => handle.release(failure).catch(() => {})))
      throw error
    }
    // A release that failed is surfaced: the transaction in `resource` may not have
    // committed, or the lock lingers until its lease ends.
    const released = await Promise.allSettled(held.map(([, handle]) => handle.release()))
    const failed = released.find((outcome) => outcome.status === 'rejected')
    if (failed) throw failed.reason
    return result
  }

  /**
   * Runs `fn` holding the locks on every key of `keys`, all or none: they are taken one by
   * one in one canonical order (so `[a, b]` and `[b, a]` cannot deadlock), `wait` bounds the
   * whole call, and a busy key past it (`LockBusyError` naming it), an abort, `close()` or a
   * backend error mid-way releases every key already taken before the call rejects. `fn`
   * gets each key's token (`tokens`) and lock (`lock(key)`); `signal` aborts when any lock is
   * lost. All are released after `fn` settles. At most 100 keys per call.
   */
  withLocks<T>(
    keys: readonly string[],
    fn: (locks: MultiLockContext<Resource>) => T | Promise<T>,
    options?: LockCallOptions,
  ): Promise<T> {
    return withLocks(this.parts, keys, fn, options)
  }

  /**
   * Takes the lock, waiting up to `wait`; rejects with `LockBusyError` if it stays busy.
   * Release it with `await using` or `release()`. With `reentrant`, inside a `withLock` on
   * the same key, resolves to that lock at once (its release is then the outer call's job).
   */
  async acquire(key: string, options?: LockCallOptions): Promise<HeldLockHandle<Resource>> {
    const checkedKey = this.checkKey(key)
    const settings = parseCallOptions(options, this.settings, true)
    const outer = settings.reentrant ? this.heldInChain(checkedKey) : undefined
    if (outer) return outer.nested()
    const handle = await this.taker.take(checkedKey, settings)
    if (!handle) throw new LockBusyError(checkedKey, settings.waitMs)
    return handle
  }

  /** One attempt, no waiting: the lock, or `undefined` when someone else holds it. */
  async tryAcquire(
    key: string,
    options?: Omit<LockCallOptions, 'wait'>,
  ): Promise<HeldLockHandle<Resource> | undefined> {
    const checkedKey = this.checkKey(key)
    const settings = parseCallOptions(options, this.settings, false)
    const outer = settings.reentrant ? this.heldInChain(checkedKey) : undefined
    if (outer) return outer.nested()
    return this.taker.take(checkedKey, settings)
  }

  /**
   * Runs `fn` on at most one instance per tick of a scheduled job (ShedLock semantics):
   * claims `name` in the backend (Redis, PostgreSQL, MariaDB/MySQL) by the store's clock
   * until `lockAtMostFor`; every other instance gets `{ ran: false }` at once, without
   * waiting. After the run the claim stays until `lockAtLeastFor` from its start, so an
   * instance whose timer fires a little late skips the tick. `fn`'s error propagates here.
   * Pair it with `schedule()` (`stampede-guard/lock`) to fire it every N ms or on a cron.
   */
  runOnce<T>(
    name: string,
    fn: (context: RunOnceContext) => T | Promise<T>,
    options: RunOnceOptions,
  ): Promise<RunOnceResult<T>> {
    if (this.closing.signal.aborted) return Promise.reject(new LocksClosedError())
    const { claims, name: backendName } = this.backend
    const { maxKeyLength } = this.settings
    return runOnce(claims, backendName, name, fn, options, maxKeyLength, this.closing.signal, this.events)
  }

  /**
   * A counting semaphore named `name`: at most `permits` permits held at once across every
   * process sharing the store (see `Semaphore`). Backends: Redis, PostgreSQL, etcd and ZooKeeper;
   * others throw `InvalidArgumentError` (`backend`). Creating one sends nothing.
   */
  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    return openSemaphore(this.parts, name, options)
  }

  /**
   * A read-write lock on `name`: `read(fn)` runs `fn` sharing the lock with other readers,
   * `write(fn)` alone; `acquireRead()`/`acquireWrite()` give a handle (`await using`).
   * Writers go first (a waiting writer keeps new readers out), each holder renews only its
   * own lease, and asking for the write lock while the call chain holds the read lock
   * rejects at once with `LockUpgradeError`. Redis, PostgreSQL (transaction mode), etcd, ZooKeeper; see docs/locks.md.
   */
  readWrite(name: string): ReadWriteLock<Resource> {
    return openReadWrite(this.parts, name)
  }

  /**
   * Campaigns for leadership of `name` and resolves once this candidate leads: the
   * `Leadership` (`term`, a fencing token strictly greater than every earlier leader's;
   * `signal`, aborted when the leadership ends without `resign()`; `leading`, the same by
   * the clock read now; `resign()`, `await using`). The leadership is a lease renewed by the
   * watchdog and given up by this process's monotonic clock before the store can elect
   * anyone else. Store failures while campaigning are retried (and reported as
   * `backend-error`); `signal` and `close()` end the campaign. Emits `acquired` when
   * elected, then `released` (resigned) or `lost` (deposed), keyed by `name`. Redis, etcd
   * and ZooKeeper; other backends reject with `InvalidArgumentError` (docs/locks.md says why).
   */
  elect(name: string, options?: ElectOptions): Promise<Leadership> {
    return campaign(this.parts, name, options)
  }

  /**
   * Reports who leads `name`, and each change, without campaigning: iterate the observer
   * (the leader at start, then each change; `undefined` while nobody leads) or read its
   * `leader`. Close it with `close()`, `await using` or `signal`. See `LeaderObserver`.
   */
  observe(name: string, options?: ObserveOptions): LeaderObserver {
    return observeLeader(this.parts, name, options)
  }

  /**
   * Runs `fn` now, then once more after the last trigger that arrived while it ran, never
   * two at once across every instance (a debounce for "something changed, recompute"):
   * each call is a trigger; the instance running the job gets `{ ran: true, runs, value }`,
   * every other trigger `{ ran: false }` at once. Redis only. See `coalesce()`.
   */
  coalesce<T>(
    name: string,
    fn: (context: CoalesceContext) => T | Promise<T>,
    options?: CoalesceOptions,
  ): Promise<CoalesceResult<T>> {
    if (this.closing.signal.aborted) return Promise.reject(new LocksClosedError())
    const { coalesce: store, name: backend } = this.backend
    return coalesce(store, backend, name, fn, options, this.settings, this.closing.signal, this.events)
  }

  /**
   * Stops accepting calls, ends waits in progress (`LocksClosedError`), aborts the
   * `signal` of every lock still held through this object with `LockLostError` and
   * releases it, aborts the `signal` of its `runOnce` and `coalesce` runs in progress (their
   * claims are renewed no more), then closes the backend. The clients you passed stay open.
   */
  close(): Promise<void> {
    this.closed ??= (async () => {
      this.closing.abort(new LocksClosedError())
      await Promise.all(
        [...this.live].map((handle) => {
          const lost = new LockLostError(handle.key, 'close() was called')
          handle.lose(lost)
          // As a failure: a transactional backend rolls back what fn may still be writing.
          return handle.release(lost).catch(() => {})
        }),
      )
      await this.backend.readWrite?.close()
      await this.backend.election?.close()
      await this.backend.close()
    })()
    return this.closed
  }

  private checkKey(key: string): string {
    if (this.closing.signal.aborted) throw new LocksClosedError()
    return validateKey(key, this.settings.maxKeyLength)
  }

  private heldInChain(key: string): LockHandle<Resource> | undefined {
    const held = this.chain.getStore()?.get(key)
    return held && !held.ended ? held : undefined
  }
}
