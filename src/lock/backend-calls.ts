import { LockBackendError, LockLostError } from '../errors.js'
import { MAX_TIMER_MS } from '../duration.js'
import { withTimeout } from '../timers.js'

/*
 * Calls to a database or consensus store (PostgreSQL, MariaDB/MySQL, etcd, ZooKeeper), each
 * bounded in time and failing with a typed `LockBackendError`. The Redis backends have their
 * own (redis/bounded-call.ts: `RedisUnavailableError`, and no command sent while offline).
 */

/**
 * Bounds one database call: rejects with `LockBackendError` after `ms`, or with the
 * driver's error wrapped the same way, so a caller never sees an untyped error or a hang.
 * `onTimeout` runs first (destroy the connection, so the server drops what it was doing).
 */
export async function boundedBackendCall<T>(
  backend: string,
  what: string,
  call: Promise<T>,
  ms: number,
  onTimeout?: () => void,
): Promise<T> {
  // wait + timeout can pass Node's timer limit, where setTimeout would fire after 1 ms
  ms = Math.min(ms, MAX_TIMER_MS)
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

/**
 * Borrows a connection (`pool.connect()`, `pool.getConnection()`) within `ms`; one that
 * arrives after the bound is handed to `giveBack` at once instead of leaking.
 */
export async function borrowBounded<T>(
  backend: string,
  borrowing: Promise<T>,
  giveBack: (connection: T) => void,
  ms: number,
): Promise<T> {
  let late = false
  borrowing.then(
    (connection) => {
      if (late) giveBack(connection)
    },
    () => {},
  )
  return boundedBackendCall(backend, 'connect', borrowing, ms, () => (late = true))
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
