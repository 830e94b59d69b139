import { InvalidArgumentError } from '../errors.js'

/**
 * What a lock front (`createLocks`) emits, through `locks.on(event, listener)`; what
 * `instrumentLocks()` (`stampede-guard/otel`) reports. Each event is emitted
 * synchronously in the async context of the call it concerns (the `acquire`,
 * `tryAcquire` or `withLock` call, or the `release()`), so a span opened for it becomes a
 * child of that caller's span. `backend` is the backend's `name` (`'redis'`, `'postgres'`, …).
 *
 * Per acquisition: one `acquired` or one `busy`, and after an `acquired` exactly one of
 * `released` or `lost`. A reentrant call that reuses a lock the chain already holds emits
 * nothing (it acquires nothing); neither does an acquisition its `signal` or `close()`
 * aborted while it waited.
 */
export interface LockEvents {
  /** The lock was taken, `waitedMs` after the call began (about one round trip when it was free). */
  acquired: { key: string; backend: string; waitedMs: number }
  /**
   * The lock was held by another owner: `tryAcquire` found it busy (resolved `undefined`),
   * or an `acquire`/`withLock` wait ran out (`LockBusyError`), `waitedMs` after the call began.
   */
  busy: { key: string; backend: string; waitedMs: number }
  /** A held lock was given back (its release started), `heldMs` after it was acquired. */
  released: { key: string; backend: string; heldMs: number }
  /**
   * A held lock was lost before its release: its `signal` aborted with `LockLostError`
   * (lease ran out unconfirmed, taken over, the backend's connection or session ended, or
   * `close()` ended it), `heldMs` after it was acquired. Its later `release()` emits no `released`.
   */
  lost: { key: string; backend: string; heldMs: number; reason: string }
  /**
   * A call to the backend's store failed (`RedisUnavailableError`, `LockBackendError`, …):
   * an acquire attempt (the call then rejects with it), a lease renewal (the watchdog's
   * or `extend()`'s), or a release (the lock then ends with its lease or session).
   */
  'backend-error': { key: string; backend: string; operation: 'acquire' | 'renew' | 'release'; error: unknown }
}

export type LockEventName = keyof LockEvents

/** The one method `instrumentLocks()` needs: subscribe, and get back the function that unsubscribes. */
export interface LockEventSource {
  on<E extends LockEventName>(event: E, listener: (payload: LockEvents[E]) => void): () => void
}

type Listeners = { [E in LockEventName]: readonly ((payload: LockEvents[E]) => void)[] }

/**
 * The front's typed emitter. Emitters check `listening(event)` before building a payload,
 * so a front nobody observes pays one array-length read per event and allocates nothing.
 * Lists are replaced, never mutated, so a listener that unsubscribes during an emit does
 * not make the others skip it; each listener's throw is caught on its own.
 */
export class LockEmitter implements LockEventSource {
  private readonly listeners: Listeners = { acquired: [], busy: [], released: [], lost: [], 'backend-error': [] }

  on<E extends LockEventName>(event: E, listener: (payload: LockEvents[E]) => void): () => void {
    if (!Object.hasOwn(this.listeners, event))
      throw new InvalidArgumentError(
        'event',
        `unknown lock event ${JSON.stringify(event)} (known: ${Object.keys(this.listeners).join(', ')})`,
      )
    if (typeof listener !== 'function')
      throw new InvalidArgumentError('listener', `expected a function, got ${typeof listener}`)
    const listeners = this.listeners as unknown as Record<E, readonly ((payload: LockEvents[E]) => void)[]>
    // Its own wrapper, so unsubscribing twice, or one of two subscriptions of the same function, removes just this one.
    const subscription = (payload: LockEvents[E]) => listener(payload)
    listeners[event] = [...listeners[event], subscription]
    return () => {
      listeners[event] = listeners[event].filter((other) => other !== subscription)
    }
  }

  listening(event: LockEventName): boolean {
    return this.listeners[event].length > 0
  }

  emit<E extends LockEventName>(event: E, payload: LockEvents[E]): void {
    for (const listener of (this.listeners as unknown as Record<E, readonly ((payload: LockEvents[E]) => void)[]>)[
      event
    ]) {
      try {
        listener(payload)
      } catch {
        // A throwing listener must not break a lock call (nor skip the release after it).
      }
    }
  }
}
