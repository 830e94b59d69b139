import { InvalidArgumentError, LockBusyError } from '../errors.js'
import type { HeldLock, LockBackend } from './backend.js'
import type { LockEmitter } from './events.js'
import { LockHandle } from './handle.js'
import { linkedSignal } from './linked-signal.js'
import type { LocalLine } from './local-line.js'
import type { LockSettings } from './options.js'

/** A call's settings, with the caller's `signal` if it gave one. */
export type TakeSettings = LockSettings & { signal?: AbortSignal }

/**
 * How to take a lock when not the plain way: `acquire`, what to hold instead of the backend's
 * lock on the key (a semaphore's permits); `backend`, another backend of the same store (an
 * election's candidates, a read-write lock's sides), with its own waiting `line` and the
 * `label` to store.
 */
export interface TakeRoute<Resource> {
  acquire?: (waitMs: number, signal: AbortSignal) => Promise<HeldLock<Resource> | undefined>
  backend?: LockBackend<unknown>
  line?: string
  label?: string
}

/**
 * How a `Locks` object takes a lock from its backend: in this process's line for the key
 * (or the store's own, for a fair lock), within the call's wait and signal and `close()`,
 * reporting `busy` and `backend-error`; a lock taken becomes a `LockHandle` (watchdog,
 * events) counted among the live ones until it ends.
 */
export class LockTaker<Resource> {
  constructor(
    private readonly backend: LockBackend<Resource>,
    private readonly events: LockEmitter,
    /** Aborted by `close()`. */
    private readonly closing: AbortSignal,
    /** This process's line of acquisitions per key. */
    private readonly line: LocalLine,
    /** The handles not yet ended, which `close()` releases. */
    private readonly live: Set<LockHandle<unknown>>,
  ) {}

  /** Resolves the handle, `undefined` when busy after no wait; rejects `LockBusyError` when a wait ran out. */
  async take(
    key: string,
    settings: TakeSettings,
    /** How to take it, when not the plain way (see `TakeRoute`). */
    route?: TakeRoute<Resource>,
  ): Promise<LockHandle<Resource> | undefined> {
    const backend = (route?.backend ?? this.backend) as LockBackend<Resource>
    const acquire = route?.acquire
    const fair = settings.fair && !acquire
    if (fair && !backend.fifo)
      throw new InvalidArgumentError('fair', `the ${backend.name} backend serves waiters in no promised order`)
    const linked = settings.signal ? linkedSignal([settings.signal, this.closing]) : undefined
    const signal = linked?.signal ?? this.closing
    if (signal.aborted) throw signal.reason
    const startedAt = performance.now()
    let held: HeldLock<Resource> | undefined
    try {
      held = acquire
        ? await acquire(settings.waitMs, signal)
        : fair && backend.fifo === 'optional'
          ? // Every waiter joins the store's line itself: a local line in front would reorder them.
            await backend.acquire({ key, leaseMs: settings.leaseMs, waitMs: settings.waitMs, signal, fair })
          : await this.line.inTurn((route?.line ?? '') + key, settings.waitMs, signal, (waitMs) =>
              backend.acquire({ key, leaseMs: settings.leaseMs, waitMs, signal, label: route?.label }),
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
    return this.adopt(key, held, settings.leaseMs, startedAt)
  }

  /** The front's handle (watchdog, events, `close()`) for a lock the backend took. */
  private adopt(key: string, held: HeldLock<Resource>, leaseMs: number, startedAt: number): LockHandle<Resource> {
    const handle: LockHandle<Resource> = new LockHandle(
      key,
      this.backend.name,
      held,
      leaseMs,
      this.events,
      startedAt,
      () => this.live.delete(handle),
    )
    this.live.add(handle)
    return handle
  }

  /**
   * Takes `keys` (consecutive in the canonical order, one atomic run of the backend) in one
   * step with `acquireAll`, waiting up to `waitMs`; the handles in key order. Busy at the
   * deadline: `LockBusyError` naming the key still held.
   */
  async takeAll(keys: readonly string[], settings: TakeSettings): Promise<LockHandle<Resource>[]> {
    const linked = settings.signal ? linkedSignal([settings.signal, this.closing]) : undefined
    const signal = linked?.signal ?? this.closing
    const startedAt = performance.now()
    let held: HeldLock<Resource>[] | { busy: string }
    try {
      if (signal.aborted) throw signal.reason
      held = await this.backend.acquireAll!({ keys, leaseMs: settings.leaseMs, waitMs: settings.waitMs, signal })
    } catch (error) {
      if (error !== signal.reason && this.events.listening('backend-error'))
        this.events.emit('backend-error', { key: keys[0]!, backend: this.backend.name, operation: 'acquire', error })
      throw error
    } finally {
      linked?.dispose()
    }
    if (Array.isArray(held) && signal.aborted) {
      await Promise.all(held.map((lock) => lock.release().catch(() => {})))
      throw signal.reason
    }
    if (!Array.isArray(held)) {
      if (signal.aborted) throw signal.reason
      const waitedMs = performance.now() - startedAt
      if (this.events.listening('busy'))
        this.events.emit('busy', { key: held.busy, backend: this.backend.name, waitedMs })
      throw new LockBusyError(held.busy, Math.round(waitedMs))
    }
    return held.map((lock, i) => this.adopt(keys[i]!, lock, settings.leaseMs, startedAt))
  }
}
