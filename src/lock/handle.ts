import { parseDuration, type Duration } from '../duration.js'
import { FencingUnsupportedError, InvalidArgumentError, LockLostError } from '../errors.js'
import type { HeldLock } from './backend.js'
import type { LockEmitter, LockEvents } from './events.js'
import { MIN_LEASE_MS } from './options.js'
import { LeaseWatchdog } from '../lease/watchdog.js'

/** What a critical section gets: `withLock`'s callback argument, and the core of a `LockHandle`. */
export interface LockContext<Resource = void> {
  /** The key as given. */
  readonly key: string
  /**
   * The fencing token: strictly increasing per key across every holder, so the resource
   * you write can refuse a write from an older holder (`UPDATE … WHERE fence < $token`).
   * Reading it on a backend that issues none honestly (Redlock) throws `FencingUnsupportedError`.
   */
  readonly token: bigint
  /** Aborts with `LockLostError` when the lock is lost: stop writing. Never aborted by a release. */
  readonly signal: AbortSignal
  /**
   * Extends the lease to `lease` (default: the lease it was taken with) from now, and
   * keeps renewing at that length. Rejects with `LockLostError` if the lock is lost, or
   * with the backend's error if its store could not be reached.
   */
  extend(lease?: Duration): Promise<void>
  /** The backend's handle for the critical section (the PostgreSQL transaction client, …); `undefined` for Redis. */
  readonly resource: Resource
  /**
   * ms the lock is still ours for certain, read now from the monotonic clock against the
   * watchdog's deadline (`last confirmed renewal sent + lease − margin`): right at the first
   * instruction after a pause (GC, SIGSTOP), before the deadline's timer has run. 0 once
   * lost or released. `Infinity` where the lock lives as long as a connection rather than a
   * lease (PostgreSQL, MariaDB), until that backend reports the connection lost.
   */
  readonly validForMs: number
  /**
   * Throws `LockLostError` unless the lock is still ours by {@link validForMs} (and aborts
   * `signal` then, if its timer had not yet). Call it right before a side effect: unlike
   * `signal.aborted`, it is right after a pause. A pause *between* this check and the write
   * can still let a write land late: that gap is what the fencing `token` closes.
   */
  assertHeld(): void
}

/**
 * A held lock, from `acquire`/`tryAcquire`. `await using held = await locks.acquire(k)`
 * releases it when the block exits; `release()` does the same by hand and is idempotent.
 */
export interface HeldLockHandle<Resource = void> extends LockContext<Resource>, AsyncDisposable {
  /**
   * Gives the lock back (compare-and-delete: never another holder's). Idempotent. Rejects only
   * when the store could not be told; the lock then ends with its lease.
   */
  release(): Promise<void>
}

/**
 * The front's side of one held lock: the watchdog, the signal, and the release. It
 * reports how the hold ended (`released` or `lost`, exactly once) and the store calls
 * that failed under it (`backend-error`), see {@link LockEvents}.
 */
export class LockHandle<Resource = void> implements HeldLockHandle<Resource> {
  readonly signal: AbortSignal
  /** `performance.now()` when the front got the lock: hold times run from here. */
  readonly acquiredAt = performance.now()
  private readonly controller = new AbortController()
  /**
   * Aborted when the release starts: what nested (reentrant) views still alive must learn.
   * Made by the first `nested()` only: a release with none sends its command without first
   * building an error (and its stack) that nobody would read.
   */
  private ending: AbortController | undefined
  private readonly watchdog: LeaseWatchdog | undefined
  private released: Promise<void> | undefined
  private readonly fromBackend: () => void

  constructor(
    readonly key: string,
    private readonly backendName: string,
    private readonly held: HeldLock<Resource>,
    private readonly leaseMs: number,
    private readonly events: LockEmitter,
    /** `performance.now()` when the acquire call began, for the `acquired` event's wait. */
    waitStartedAt: number,
    private readonly onReleased: () => void,
  ) {
    this.signal = this.controller.signal
    // Before anything below can report the lock lost.
    if (events.listening('acquired'))
      events.emit('acquired', { key, backend: backendName, waitedMs: this.acquiredAt - waitStartedAt })
    if (held.liveness === 'lease') {
      this.watchdog = new LeaseWatchdog({
        key,
        leaseMs,
        startedAt: held.acquiredAt ?? performance.now(),
        renew: (ms) => this.renew(ms),
        onLost: (error) => this.lose(error),
      })
    }
    this.fromBackend = () =>
      this.lose(
        held.signal.reason instanceof LockLostError
          ? held.signal.reason
          : new LockLostError(key, String(held.signal.reason ?? 'the backend lost it')),
      )
    if (held.signal.aborted) this.fromBackend()
    else held.signal.addEventListener('abort', this.fromBackend, { once: true })
  }

  get token(): bigint {
    const { token } = this.held
    if (token === undefined) {
      throw new FencingUnsupportedError(
        this.backendName,
        'its independent nodes cannot agree on a monotonic counter; guard the resource with its own check (see docs/locks.md)',
      )
    }
    return token
  }

  get resource(): Resource {
    return this.held.resource
  }

  get validForMs(): number {
    if (this.signal.aborted || this.released) return 0
    if (this.watchdog) return this.watchdog.validForMs
    const until = this.validUntil
    return until === undefined ? Infinity : Math.max(0, until - performance.now())
  }

  assertHeld(): void {
    this.watchdog?.expireIfDue() // aborts signal (through onLost) when the deadline passed unseen
    if (!this.signal.aborted && !this.released && this.validForMs <= 0)
      this.lose(new LockLostError(this.key, 'its lease or session ran out before a confirmation'))
    if (this.signal.aborted) throw this.signal.reason
    if (this.released) throw new LockLostError(this.key, 'it was released')
  }

  /**
   * The `performance.now()` instant until which no one else can get this lock, by this
   * process's clock (see `HeldLock.validUntil`); `undefined` for connection-bound locks.
   */
  get validUntil(): number | undefined {
    return this.watchdog ? this.watchdog.deadline : this.held.validUntil?.()
  }

  /** True once released or lost. */
  get ended(): boolean {
    return this.released !== undefined || this.signal.aborted
  }

  async extend(lease?: Duration): Promise<void> {
    const ms = lease === undefined ? this.leaseMs : parseDuration('lease', lease)
    if (ms < MIN_LEASE_MS)
      throw new InvalidArgumentError('lease', `must be at least ${MIN_LEASE_MS} ms, got ${String(lease)}`)
    if (this.signal.aborted) throw this.signal.reason
    if (this.released) throw new LockLostError(this.key, 'it was released')
    const extended = this.watchdog ? await this.watchdog.extend(ms) : await this.renew(ms)
    if (!extended) {
      if (!this.signal.aborted) this.lose(new LockLostError(this.key, 'the lock expired or was taken by another owner'))
      throw this.signal.reason
    }
  }

  /** `failure`: what the critical section threw (from `withLock`), so a transactional backend rolls back. */
  release(failure?: unknown): Promise<void> {
    this.released ??= (async () => {
      // Synchronously, in the releasing caller's context; a lost lock reported its end already.
      if (!this.signal.aborted && this.events.listening('released'))
        this.events.emit('released', {
          key: this.key,
          backend: this.backendName,
          heldMs: performance.now() - this.acquiredAt,
        })
      this.ending?.abort(this.endedForNested())
      this.held.signal.removeEventListener('abort', this.fromBackend)
      try {
        await this.watchdog?.stop()
        await (failure === undefined ? this.held.release() : this.held.release(failure))
      } catch (error) {
        // A store that answered "already expired" (a semaphore's permits) did not fail.
        if (!(error instanceof LockLostError)) this.failed('release', error)
        throw error
      } finally {
        this.onReleased()
      }
    })()
    return this.released
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release()
  }

  private endedForNested(): LockLostError {
    return new LockLostError(this.key, 'the outer holder released it while a nested (reentrant) call still used it')
  }

  /** Ends the lock for this holder: aborts `signal` once. `close()` uses it too. */
  lose(error: LockLostError): void {
    if (this.controller.signal.aborted) return
    // A loss from elsewhere (the backend, close()) ends the renewals; the watchdog's own
    // deadline loss keeps them going while the lock may still be ours.
    if (!this.watchdog?.lost) this.watchdog?.lose(error.reason)
    if (this.controller.signal.aborted) return // the watchdog's onLost came back here and ended it
    this.controller.abort(error)
    // Once released, the hold has ended already (close() can still abort a releasing lock).
    if (this.released === undefined && this.events.listening('lost')) {
      this.events.emit('lost', {
        key: this.key,
        backend: this.backendName,
        heldMs: performance.now() - this.acquiredAt,
        reason: error.reason,
      })
    }
  }

  private async renew(ms: number): Promise<boolean> {
    try {
      return await this.held.renew(ms)
    } catch (error) {
      this.failed('renew', error)
      throw error
    }
  }

  private failed(operation: LockEvents['backend-error']['operation'], error: unknown): void {
    if (this.events.listening('backend-error'))
      this.events.emit('backend-error', { key: this.key, backend: this.backendName, operation, error })
  }

  /**
   * The view a nested reentrant call gets: the same lock, whose release is the outer
   * holder's job. A nested call that outlives the outer one (a detached promise or timer
   * started inside it inherits the call chain) holds nothing once the outer releases, so
   * its `signal` aborts with `LockLostError` then.
   */
  nested(): HeldLockHandle<Resource> {
    const outer = this
    const done = () => Promise.resolve()
    if (!outer.ending) {
      outer.ending = new AbortController()
      if (outer.released) outer.ending.abort(outer.endedForNested()) // viewed after the release began
    }
    const signal = AbortSignal.any([outer.signal, outer.ending.signal])
    return {
      key: outer.key,
      get token() {
        return outer.token
      },
      signal,
      extend: (lease) => outer.extend(lease),
      get validForMs() {
        return signal.aborted ? 0 : outer.validForMs
      },
      assertHeld() {
        outer.assertHeld()
        if (signal.aborted) throw signal.reason
      },
      get resource() {
        return outer.resource
      },
      release: done,
      [Symbol.asyncDispose]: done,
    }
  }
}
