/**
 * Every error stampede-guard throws is a `StampedeGuardError` with a stable
 * `code`, so callers can branch on `err.code` without string matching.
 */
export class StampedeGuardError extends Error {
  readonly code: string
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/** A bad option or argument. `argument` names it, e.g. `'ttl'` or `'key'`. */
export class InvalidArgumentError extends StampedeGuardError {
  readonly argument: string
  constructor(argument: string, message: string) {
    super('ERR_SG_INVALID_ARGUMENT', `${argument}: ${message}`)
    this.argument = argument
  }
}

/**
 * The loader failed in another process (or the failure reached this caller
 * over pub/sub). The original error cannot cross processes, so this carries
 * its name and message.
 */
export class RemoteLoaderError extends StampedeGuardError {
  readonly key: string
  readonly remoteName: string
  readonly remoteMessage: string
  constructor(key: string, remoteName: string, remoteMessage: string) {
    super('ERR_SG_REMOTE_LOADER', `loader for "${key}" failed in another process: ${remoteName}: ${remoteMessage}`)
    this.key = key
    this.remoteName = remoteName
    this.remoteMessage = remoteMessage
  }
}

/**
 * A load took too long: `hardTimeout` for this caller, or `lock.maxHold` for the load
 * itself. After `hardTimeout` the load may still complete and fill the cache.
 */
export class LoaderTimeoutError extends StampedeGuardError {
  readonly key: string
  readonly timeoutMs: number
  readonly option: 'hardTimeout' | 'lock.maxHold'
  constructor(key: string, timeoutMs: number, option: 'hardTimeout' | 'lock.maxHold' = 'hardTimeout') {
    const after =
      option === 'hardTimeout' ? 'it keeps running and may still fill the cache' : 'its result will be ignored'
    super('ERR_SG_LOADER_TIMEOUT', `loader for "${key}" did not finish within ${option} (${timeoutMs} ms); ${after}`)
    this.key = key
    this.timeoutMs = timeoutMs
    this.option = option
  }
}

/**
 * A waiter gave up after `waitTimeout` with `onWaitTimeout: 'throw'` and no stale value in
 * hand; or did not wait at all, `maxWaits` cross-process waits running (then `timeoutMs` is 0).
 */
export class LockWaitTimeoutError extends StampedeGuardError {
  readonly key: string
  readonly timeoutMs: number
  /** `maxPendingWaits`: did not wait at all, since that many cross-process waits were running. */
  constructor(key: string, timeoutMs: number, maxPendingWaits?: number) {
    super(
      'ERR_SG_LOCK_WAIT_TIMEOUT',
      maxPendingWaits === undefined
        ? `gave up waiting ${timeoutMs} ms for another process to load "${key}"`
        : `did not wait for another process to load "${key}": ${maxPendingWaits} cross-process waits (maxPendingWaits) were running`,
    )
    this.key = key
    this.timeoutMs = timeoutMs
  }
}

/**
 * With `loaderConcurrency`: a load waited `timeoutMs` (its callers' `waitTimeout`) for one of
 * the fleet's `limit` loader permits and got none, or did not wait (`maxQueued` loads were
 * already waiting; then `timeoutMs` is 0). Its loader did not run; no stale value covered it.
 */
export class LoaderConcurrencyError extends StampedeGuardError {
  readonly key: string
  readonly timeoutMs: number
  readonly limit: number
  constructor(key: string, timeoutMs: number, limit: number) {
    super(
      'ERR_SG_LOADER_CONCURRENCY',
      timeoutMs > 0
        ? `the load of "${key}" waited ${timeoutMs} ms for one of the ${limit} loader permits (loaderConcurrency) and got none`
        : `the load of "${key}" did not wait for a loader permit: loaderConcurrency.maxQueued loads were already waiting`,
    )
    this.key = key
    this.timeoutMs = timeoutMs
    this.limit = limit
  }
}

/** The codec could not encode or decode a value. Reported through the `error` event, never thrown to callers. */
export class SerializationError extends StampedeGuardError {
  readonly key: string
  constructor(key: string, message: string, cause?: unknown) {
    super('ERR_SG_SERIALIZATION', `"${key}": ${message}`, { cause })
    this.key = key
  }
}

/**
 * Stored data that cannot be a value: truncated, a compressed value that does not inflate (or
 * inflates past `maxValueBytes`), an unknown compression. Reported through the `corrupt` event
 * (a miss, which one load replaces), never thrown to callers.
 */
export class CorruptValueError extends StampedeGuardError {
  constructor(message: string, cause?: unknown, code = 'ERR_SG_CORRUPT_VALUE') {
    super(code, `stored value is corrupt: ${message}`, { cause })
  }
}

/**
 * A stored value was written with another codec than this cache's (a binary codec's value
 * read with a text codec, or the other way round, or two binary codecs of different names).
 * Reported as `corrupt` (a miss, which one load replaces): every process sharing a namespace
 * must use the same codec.
 */
export class CodecMismatchError extends CorruptValueError {
  /** What wrote it: `'a text codec'` or `'the binary codec "<name>"'`. */
  readonly stored: string
  /** What this cache reads with, in the same words. */
  readonly expected: string
  constructor(stored: string, expected: string) {
    super(`written by ${stored}, read with ${expected}`, undefined, 'ERR_SG_CODEC_MISMATCH')
    this.stored = stored
    this.expected = expected
  }
}

/**
 * A value encodes to more than `maxValueBytes`. A loaded one is returned to its callers and
 * not stored (reported through the `uncacheable` event); `set()` rejects with it.
 */
export class ValueTooLargeError extends StampedeGuardError {
  readonly key: string
  /** Its encoded size in bytes, when it was counted (undefined: over the limit by length alone). */
  readonly bytes: number | undefined
  readonly maxBytes: number
  constructor(key: string, bytes: number | undefined, maxBytes: number) {
    const size = bytes === undefined ? `more than ${maxBytes}` : String(bytes)
    super(
      'ERR_SG_VALUE_TOO_LARGE',
      `"${key}": the value encodes to ${size} bytes, above maxValueBytes (${maxBytes}); not stored`,
    )
    this.key = key
    this.bytes = bytes
    this.maxBytes = maxBytes
  }
}

/** The lock was lost (extension failed or max hold reached); the reason the loader's AbortSignal fired. */
export class LockLostError extends StampedeGuardError {
  readonly key: string
  /** Why, in a few words: "the lease ran out before a renewal was confirmed", … */
  readonly reason: string
  constructor(key: string, why: string) {
    super('ERR_SG_LOCK_LOST', `lock for "${key}" lost: ${why}`)
    this.key = key
    this.reason = why
  }
}

/** A Redis command failed, timed out, or was refused because the circuit breaker is open. Handled internally: callers fall back to the loader. */
export class RedisUnavailableError extends StampedeGuardError {
  constructor(message: string, cause?: unknown) {
    super('ERR_SG_REDIS_UNAVAILABLE', message, { cause })
  }
}

/** The cache was closed; no new calls are accepted. */
export class CacheClosedError extends StampedeGuardError {
  constructor() {
    super('ERR_SG_CLOSED', 'the cache is closed')
  }
}

/** A lock was busy: `tryAcquire` found it held, or a wait ran out. `waitedMs` says how long this caller waited. */
export class LockBusyError extends StampedeGuardError {
  readonly key: string
  readonly waitedMs: number
  constructor(key: string, waitedMs: number) {
    super(
      'ERR_SG_LOCK_BUSY',
      waitedMs > 0
        ? `lock "${key}" still held by another owner after waiting ${waitedMs} ms`
        : `lock "${key}" is held by another owner`,
    )
    this.key = key
    this.waitedMs = waitedMs
  }
}

/**
 * A lock backend's store failed or could not be reached (a quorum could not be formed,
 * a connection broke, a call timed out). Distinct from `LockBusyError`: nobody was
 * found holding the lock; the store itself did not answer. Redis backends throw
 * `RedisUnavailableError` instead, as the cache does.
 */
export class LockBackendError extends StampedeGuardError {
  readonly backend: string
  constructor(backend: string, message: string, cause?: unknown) {
    super('ERR_SG_LOCK_BACKEND', `${backend}: ${message}`, { cause })
    this.backend = backend
  }
}

/** The fencing token was read from a backend that cannot issue a monotonic one (Redlock). */
export class FencingUnsupportedError extends StampedeGuardError {
  readonly backend: string
  constructor(backend: string, why: string) {
    super('ERR_SG_FENCING_UNSUPPORTED', `${backend} issues no fencing token: ${why}`)
    this.backend = backend
  }
}

/** `close()` was called on the `Locks` object: no new acquisitions, and waits in progress end with this. */
export class LocksClosedError extends StampedeGuardError {
  constructor() {
    super('ERR_SG_LOCKS_CLOSED', 'the lock service is closed')
  }
}

/**
 * A holder of a read lock asked for the write lock of the same read-write lock (in the same
 * async call chain). Waiting would deadlock: the write lock waits for every reader to leave,
 * itself included. Rejected at once; release the read lock first (Redisson #4796).
 */
export class LockUpgradeError extends StampedeGuardError {
  readonly key: string
  constructor(key: string) {
    super(
      'ERR_SG_LOCK_UPGRADE',
      `read-write lock "${key}": this call chain holds its read lock, so write() would wait for itself; release the read lock first`,
    )
    this.key = key
  }
}

/**
 * `getOrLoadMany`'s batch loader gave no value for `key`: its result had no entry for the key
 * (`reason: 'missing'`), or was not a Map, nor an array with one item per key it was given
 * (`'malformed'`). Only the keys concerned fail, each with its own error.
 */
export class BatchResultError extends StampedeGuardError {
  readonly key: string
  readonly reason: 'missing' | 'malformed'
  constructor(key: string, reason: 'missing' | 'malformed', detail: string) {
    super('ERR_SG_BATCH_RESULT', `batch loader gave no value for "${key}": ${detail}`)
    this.key = key
    this.reason = reason
  }
}
