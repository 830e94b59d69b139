import { LockBackendError, LockLostError } from '../errors.js'
import { withTimeout } from '../timers.js'

/**
 * The state of a lock that lives as long as one database connection (PostgreSQL,
 * MariaDB/MySQL): held until released, or lost when the connection ends first. Loss
 * aborts `signal` once, with `LockLostError`; a release never aborts it.
 */
export class ConnectionHold {
  private readonly controller = new AbortController()
  private state: 'held' | 'lost' | 'released' = 'held'

  constructor(private readonly key: string) {}

  get signal(): AbortSignal {
    return this.controller.signal
  }

  get held(): boolean {
    return this.state === 'held'
  }

  get lost(): boolean {
    return this.state === 'lost'
  }

  /** The connection (or its server session) ended while the lock was held. */
  lose(why: string): void {
    if (this.state !== 'held') return
    this.state = 'lost'
    this.controller.abort(new LockLostError(this.key, why))
  }

  /** Marks the hold released; `false` when it already was (release is idempotent). */
  beginRelease(): boolean {
    if (this.state === 'released') return false
    this.state = 'released'
    return true
  }
}

/**
 * Bounds one database call: rejects with `LockBackendError` after `ms`, or with the
 * driver's error wrapped the same way, so a caller never sees an untyped error or a hang.
 * `onTimeout` runs first (destroy the connection, so the server drops what it was doing).
 */
export async function boundedCall<T>(backend: string, what: string, call: Promise<T>, ms: number, onTimeout?: () => void): Promise<T> {
  try {
    return await withTimeout(call, ms, () => {
      onTimeout?.()
      return new LockBackendError(backend, `${what} did not answer within ${ms} ms`)
    })
  } catch (err) {
    throw asBackendError(backend, what, err)
  }
}

export function asBackendError(backend: string, what: string, err: unknown): Error {
  if (err instanceof LockBackendError || err instanceof LockLostError) return err
  const message = err instanceof Error ? err.message : String(err)
  return new LockBackendError(backend, `${what} failed: ${message}`, err)
}

/** Rejects with the caller's abort reason when `signal` fires first. */
export function abortable<T>(call: Promise<T>, signal: AbortSignal, onAbort: () => void): Promise<T> {
  if (signal.aborted) {
    onAbort()
    call.catch(() => {})
    return Promise.reject(signal.reason)
  }
  return new Promise<T>((resolve, reject) => {
    const abort = () => {
      onAbort()
      reject(signal.reason)
    }
    signal.addEventListener('abort', abort, { once: true })
    call.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort))
  })
}
