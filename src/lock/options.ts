import { parseDuration, type Duration } from '../duration.js'
import { InvalidArgumentError } from '../errors.js'

/** Options of one `withLock` / `acquire` / `tryAcquire` call. Unset ones take the `createLocks` defaults. */
export interface LockCallOptions {
  /**
   * How long the lock outlives its holder if the holder dies without releasing it: the
   * longest a crashed holder blocks the next one. While held, the lease is renewed every
   * lease/3 (for lease-based backends), so it need not cover the critical section.
   * Milliseconds or `'5s'`; at least 30 ms, at most 2^31 − 1 ms. Default `'5s'`.
   */
  lease?: Duration
  /**
   * How long to wait for a busy lock before giving up with `LockBusyError`. `0` means
   * one attempt. Milliseconds or `'10s'`, at most 2^31 − 1 ms. Default `'10s'` for
   * `withLock` and `acquire`; `tryAcquire` never waits.
   */
  wait?: Duration
  /**
   * Let a `withLock` nested in the same async call chain, on the same key of the same
   * `Locks`, run at once under the outer lock instead of deadlocking on it (Redisson's
   * RLock). Tracked with AsyncLocalStorage; the outer call still releases. Default `false`.
   */
  reentrant?: boolean
  /** Abort to stop waiting (the call rejects with the signal's reason). Does not end a lock already held. */
  signal?: AbortSignal
  /**
   * Serve waiters in the order they started waiting, across processes (FIFO), and wake only
   * the next one at a release. On Redis the line lives in the lock's own keys; each waiter
   * re-checks (beats) every lease/3 and a waiter silent for a whole lease is dropped, so a
   * dead one holds the line up for at most one lease. etcd and ZooKeeper are always FIFO;
   * Redlock, PostgreSQL and MariaDB/MySQL refuse `true`. Every process must use the same
   * setting on a key: mixed, they still exclude each other, but an unfair acquire ignores
   * the line. `tryAcquire` never joins the line and fails while anyone is in it. Default
   * `false`, because a fair waiter costs a subscription and a heartbeat call every lease/3
   * where unfair waiters share one subscription per key per process, and because turning it
   * on by default would mix the two modes on a key during a rolling upgrade (safe, but in no
   * order); choose it where waiters' order or tail latency matters (docs/locks.md).
   */
  fair?: boolean
}

/** The defaults `createLocks` accepts for every call. */
export interface LockDefaults {
  /** Default lease (see {@link LockCallOptions.lease}). Default `'5s'`. */
  lease?: Duration
  /** Default wait (see {@link LockCallOptions.wait}). Default `'10s'`. */
  wait?: Duration
  /** Default reentrancy (see {@link LockCallOptions.reentrant}). Default `false`. */
  reentrant?: boolean
  /** Longest key accepted, in UTF-16 code units. Default `1024`. */
  maxKeyLength?: number
  /** Default fairness (see {@link LockCallOptions.fair}). Default `false`. */
  fair?: boolean
}

export interface LockSettings {
  leaseMs: number
  waitMs: number
  reentrant: boolean
  maxKeyLength: number
  fair: boolean
}

/** Shortest lease: renewal runs every lease/3 and the margin is 1 % + 2 ms. */
export const MIN_LEASE_MS = 30

const CALL_KEYS = new Set(['lease', 'wait', 'reentrant', 'signal', 'fair'])

/** `fallback` when the option was not given; anything else, `null` included, is checked as given. */
export function orDefault<T>(value: T | undefined, fallback: T): T {
  return value === undefined ? fallback : value
}

export function parseDefaults(defaults: LockDefaults): LockSettings {
  const maxKeyLength = orDefault(defaults.maxKeyLength, 1024)
  if (!Number.isSafeInteger(maxKeyLength) || maxKeyLength < 1)
    throw new InvalidArgumentError('maxKeyLength', `must be a positive integer, got ${String(maxKeyLength)}`)
  return {
    leaseMs: parseLease('lease', orDefault(defaults.lease, 5_000)),
    waitMs: parseDuration('wait', orDefault(defaults.wait, 10_000), true),
    reentrant: parseFlag('reentrant', orDefault(defaults.reentrant, false)),
    maxKeyLength,
    fair: parseFlag('fair', orDefault(defaults.fair, false)),
  }
}

/** One call's options over the defaults. `waits: false` for `tryAcquire`. */
export function parseCallOptions(
  options: LockCallOptions | undefined,
  defaults: LockSettings,
  waits: boolean,
): LockSettings & { signal?: AbortSignal } {
  if (options === undefined) return { ...defaults, waitMs: waits ? defaults.waitMs : 0 }
  if (options === null || typeof options !== 'object')
    throw new InvalidArgumentError('options', `expected an object, got ${options === null ? 'null' : typeof options}`)
  for (const name of Object.keys(options)) {
    if (!CALL_KEYS.has(name))
      throw new InvalidArgumentError(name, `unknown lock option (known: ${[...CALL_KEYS].join(', ')})`)
  }
  const { signal } = options
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new InvalidArgumentError('signal', 'expected an AbortSignal')
  if (!waits && options.wait !== undefined)
    throw new InvalidArgumentError('wait', 'tryAcquire never waits; use acquire(key, { wait })')
  return {
    leaseMs: options.lease === undefined ? defaults.leaseMs : parseLease('lease', options.lease),
    waitMs: !waits ? 0 : options.wait === undefined ? defaults.waitMs : parseDuration('wait', options.wait, true),
    reentrant: options.reentrant === undefined ? defaults.reentrant : parseFlag('reentrant', options.reentrant),
    maxKeyLength: defaults.maxKeyLength,
    fair: options.fair === undefined ? defaults.fair : parseFlag('fair', options.fair),
    signal,
  }
}

export function parseLease(argument: string, value: Duration): number {
  const ms = parseDuration(argument, value)
  if (ms < MIN_LEASE_MS)
    throw new InvalidArgumentError(argument, `must be at least ${MIN_LEASE_MS} ms, got ${String(value)}`)
  return ms
}

function parseFlag(argument: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new InvalidArgumentError(argument, `expected a boolean, got ${typeof value}`)
  return value
}

/** Keys must be non-empty, bounded, well-formed UTF-16 strings: a lone surrogate would be sent as U+FFFD and collide. */
export function validateKey(key: unknown, maxKeyLength: number): string {
  if (typeof key !== 'string')
    throw new InvalidArgumentError('key', `expected a string, got ${key === null ? 'null' : typeof key}`)
  if (key.length === 0) throw new InvalidArgumentError('key', 'must not be empty')
  if (key.length > maxKeyLength)
    throw new InvalidArgumentError('key', `is ${key.length} characters long; at most ${maxKeyLength} (maxKeyLength)`)
  if (!isWellFormed(key)) throw new InvalidArgumentError('key', 'contains a lone surrogate (not well-formed UTF-16)')
  // U+0000 marks the names the front keeps for itself (a read-write lock's or an election's
  // holds and waiting lines): a user key spelled like one would share its hold or its line.
  if (key.includes('\u0000')) throw new InvalidArgumentError('key', 'must not contain U+0000 (reserved)')
  return key
}

function isWellFormed(text: string): boolean {
  const native = (text as { isWellFormed?: () => boolean }).isWellFormed
  if (native) return native.call(text)
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text)
}

/** `validateKey`, with the error naming `argument` (`name` of an election, a job, a read-write lock) instead of `key`. */
export function namedKey(argument: string, value: unknown, maxKeyLength: number): string {
  try {
    return validateKey(value, maxKeyLength)
  } catch (error) {
    if (error instanceof InvalidArgumentError)
      throw new InvalidArgumentError(argument, error.message.replace(/^key: /, ''))
    throw error
  }
}
