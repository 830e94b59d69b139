import { AsyncLocalStorage } from 'node:async_hooks'
import { setMaxListeners } from 'node:events'
import { InvalidArgumentError, LockBusyError, LockLostError, LocksClosedError } from '../errors.js'
import { delay } from '../timers.js'
import type { HeldLock, LockBackend } from './backend.js'
import { LockEmitter, type LockEventName, type LockEvents, type LockEventSource } from './events.js'
import { LockHandle, type HeldLockHandle, type LockContext } from './handle.js'
import {
  parseCallOptions,
  parseDefaults,
  validateKey,
  type LockCallOptions,
  type LockDefaults,
  type LockSettings,
} from './options.js'
import { linkedSignal } from './linked-signal.js'
import { resolveBackend, SHORTCUT_OPTIONS, type BackendShortcuts, type StoreOptions } from './resolve-backend.js'
import { runOnce, type RunOnceContext, type RunOnceOptions, type RunOnceResult } from './run-once.js'
import type {
  BackendLocksOptions,
  EtcdFencedWrites,
  EtcdLocksOptions,
  MysqlLocksOptions,
  PoolClientOf,
  PostgresLocksOptions,
  PostgresSessionLocksOptions,
  RedisLocksOptions,
  RedlockLocksOptions,
  ZooKeeperFencedWrites,
  ZooKeeperLocksOptions,
} from './inferred-resource.js'
import type { PgPoolLike } from './postgres/options.js'

const CREATE_KEYS = new Set([
  'backend',
  'lease',
  'wait',
  'reentrant',
  'maxKeyLength',
  'namespace',
  'commandTimeout',
  ...SHORTCUT_OPTIONS,
])

export interface CreateLocksOptions<Resource = void> extends LockDefaults, BackendShortcuts, StoreOptions {
  /** Any `LockBackend`; the shortcuts (`redis`, `redlock`, …) build one for you. Give exactly one. */
  backend?: LockBackend<Resource>
}

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
  /** Per key, the newest acquisition of this process still waiting on the store (see `inTurn`). */
  private readonly waiting = new Map<string, Promise<unknown>>()
  private closed: Promise<void> | undefined

  constructor(
    private readonly backend: LockBackend<Resource>,
    defaults: LockDefaults = {},
  ) {
    this.settings = parseDefaults(defaults)
    // Every waiter listens on it for as long as it waits (and removes its listener): not a leak.
    setMaxListeners(Infinity, this.closing.signal)
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
   * If the lock is lost meanwhile, `signal` aborts with `LockLostError`; `fn`'s result is
   * still returned, since what it already did cannot be undone here: check the signal, and
   * fence your writes with `token`.
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
    const handle = await this.take(checkedKey, settings)
    if (!handle) throw new LockBusyError(checkedKey, settings.waitMs) // unreachable: take() throws when waiting
    const chain = new Map(this.chain.getStore()).set(checkedKey, handle)
    let result: T
    try {
      result = await this.chain.run(chain, () => fn(handle))
    } catch (error) {
      await handle.release(error ?? new Error('the critical section threw a nullish value')).catch(() => {})
      throw error
    }
    // A release that failed is surfaced: the transaction in `resource` may not have
    // committed, or the lock lingers until its lease ends.
    await handle.release()
    return result
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
    const handle = await this.take(checkedKey, settings)
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
    return this.take(checkedKey, settings)
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
    return runOnce(this.backend.claims, this.backend.name, name, fn, options, this.settings.maxKeyLength)
  }

  /**
   * Stops accepting calls, ends waits in progress (`LocksClosedError`), aborts the
   * `signal` of every lock still held through this object with `LockLostError` and
   * releases it, then closes the backend. The clients you passed stay open.
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

  /**
   * Waiters for one key in this process wait on the store one at a time: each starts once
   * the one before it has *acquired* (or given up), not released, so at a release every
   * process has one contender woken, as fair across processes as the backend is, instead
   * of every caller of every process racing for it. `tryAcquire` (no wait) skips the line.
   */
  private async inTurn<T>(
    key: string,
    waitMs: number,
    signal: AbortSignal,
    attempt: (waitMs: number) => Promise<T | undefined>,
  ): Promise<T | undefined> {
    if (waitMs === 0) return attempt(0)
    const ahead = this.waiting.get(key)
    const startedAt = performance.now()
    const turn = (async () => {
      if (ahead && !(await settlesWithin(ahead, waitMs, signal))) return undefined
      return attempt(Math.max(0, Math.round(waitMs - (performance.now() - startedAt))))
    })()
    this.waiting.set(key, turn)
    try {
      return await turn
    } finally {
      if (this.waiting.get(key) === turn) this.waiting.delete(key)
    }
  }

  /** Resolves the handle, `undefined` when busy after no wait; rejects `LockBusyError` when a wait ran out. */
  private async take(
    key: string,
    settings: LockSettings & { signal?: AbortSignal },
  ): Promise<LockHandle<Resource> | undefined> {
    const linked = settings.signal ? linkedSignal([settings.signal, this.closing.signal]) : undefined
    const signal = linked?.signal ?? this.closing.signal
    if (signal.aborted) throw signal.reason
    const startedAt = performance.now()
    let held: HeldLock<Resource> | undefined
    try {
      held = await this.inTurn(key, settings.waitMs, signal, (waitMs) =>
        this.backend.acquire({ key, leaseMs: settings.leaseMs, waitMs, signal }),
      )
    } catch (error) {
      if (error !== signal.reason && this.events.listening('backend-error'))
        this.events.emit('backend-error', { key, backend: this.backend.name, operation: 'acquire', error })
      throw error
    } finally {
      linked?.dispose() // after its last use below, which only reads whether it aborted
    }
    if (held && signal.aborted) {
      await held.release().catch(() => {})
      throw signal.reason
    }
    if (!held) {
      if (signal.aborted) throw signal.reason
      const waitedMs = performance.now() - startedAt
      if (this.events.listening('busy')) this.events.emit('busy', { key, backend: this.backend.name, waitedMs })
      if (settings.waitMs === 0) return undefined
      throw new LockBusyError(key, Math.round(waitedMs))
    }
    const handle: LockHandle<Resource> = new LockHandle(
      key,
      this.backend.name,
      held,
      settings.leaseMs,
      this.events,
      startedAt,
      () => this.live.delete(handle),
    )
    this.live.add(handle)
    return handle
  }
}

/**
 * Distributed locks: `createLocks({ redis })`, `createLocks({ redlock: [r1, …, r5] })`,
 * `createLocks({ postgres: pool })`, …, or `createLocks({ backend })` with any `LockBackend`.
 * The type of `resource` follows from the backend option (see inferred-resource.ts):
 * `createLocks({ postgres: pool })` with a `pg.Pool` gives `Locks<pg.PoolClient>`.
 */
export function createLocks<Pool extends PgPoolLike>(options: PostgresLocksOptions<Pool>): Locks<PoolClientOf<Pool>>
export function createLocks(options: PostgresSessionLocksOptions): Locks<undefined>
export function createLocks(options: MysqlLocksOptions): Locks<undefined>
export function createLocks(options: RedisLocksOptions | RedlockLocksOptions): Locks<void>
export function createLocks(options: EtcdLocksOptions): Locks<EtcdFencedWrites>
export function createLocks(options: ZooKeeperLocksOptions): Locks<ZooKeeperFencedWrites>
export function createLocks<Resource>(options: BackendLocksOptions<Resource>): Locks<Resource>
/** With the resource type given explicitly (`createLocks<MyResource>({ backend })`). */
export function createLocks<Resource = void>(options: CreateLocksOptions<Resource>): Locks<Resource>
export function createLocks<Resource = void>(options: CreateLocksOptions<Resource>): Locks<Resource> {
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('options', 'expected an object')
  for (const name of Object.keys(options)) {
    if (!CREATE_KEYS.has(name))
      throw new InvalidArgumentError(name, `unknown createLocks option (known: ${[...CREATE_KEYS].join(', ')})`)
  }
  const { lease, wait, reentrant, maxKeyLength } = options
  const defaults = { lease, wait, reentrant, maxKeyLength }
  parseDefaults(defaults) // before a backend opens anything
  return new Locks<Resource>(resolveBackend(options as never) as LockBackend<Resource>, defaults)
}

/** Whether `promise` settled (either way) within `ms`, before `signal` aborted. */
async function settlesWithin(promise: Promise<unknown>, ms: number, signal: AbortSignal): Promise<boolean> {
  const timeout = delay(ms)
  const onAbort = () => timeout.cancel()
  signal.addEventListener('abort', onAbort, { once: true })
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      timeout.promise.then(() => false),
    ])
  } finally {
    timeout.cancel()
    signal.removeEventListener('abort', onAbort)
  }
}
