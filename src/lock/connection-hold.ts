import { LockBackendError, LockLostError } from '../errors.js'
import type { HeldLock } from './backend.js'

/** A driver connection's lifecycle events (pg Client, mysql2 core connection). */
export interface ConnectionEvents {
  on(event: 'error' | 'end', listener: (err?: Error) => void): unknown
  removeListener(event: 'error' | 'end', listener: (err?: Error) => void): unknown
}

/**
 * The state of a lock that lives as long as one database connection (PostgreSQL,
 * MariaDB/MySQL): held until released, or lost when the connection ends first. Loss
 * aborts `signal` once, with `LockLostError`; a release never aborts it.
 */
export class ConnectionHold {
  private readonly controller = new AbortController()
  private state: 'held' | 'lost' | 'released' = 'held'
  private failure: Error | undefined
  private unwatch: (() => void) | undefined

  constructor(private readonly key: string) {}

  /** Why the connection is unusable (it failed, or we gave it up), if it is. */
  get broken(): Error | undefined {
    return this.failure
  }

  /** The connection must not be reused (a timeout or an abort left it mid-statement). */
  markBroken(why: Error): void {
    this.failure ??= why
  }

  /**
   * Loses the hold when `connection` reports an error or its end; `describe` words the
   * `LockLostError`. `stopWatching()` removes the listeners (before the connection goes back
   * to a pool that attaches its own).
   */
  watch(connection: ConnectionEvents, describe: (cause: Error) => string): void {
    const onError = (err?: Error) => {
      this.markBroken(err ?? new Error('connection ended'))
      this.lose(describe(this.failure!))
    }
    const onEnd = () => onError(new Error('connection ended'))
    connection.on('error', onError)
    connection.on('end', onEnd)
    this.unwatch = () => {
      connection.removeListener('error', onError)
      connection.removeListener('end', onEnd)
    }
  }

  stopWatching(): void {
    this.unwatch?.()
    this.unwatch = undefined
  }

  /** The contract's HeldLock for a lock just taken; throws if the connection failed while taking it. */
  heldLock<Resource>(
    backend: string,
    parts: Pick<HeldLock<Resource>, 'token' | 'resource' | 'renew' | 'release'>,
  ): HeldLock<Resource> {
    if (!this.held)
      throw new LockBackendError(
        backend,
        `the connection failed while taking the lock: ${this.failure?.message ?? 'unknown'}`,
      )
    return { ...parts, liveness: 'session', signal: this.signal }
  }

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
