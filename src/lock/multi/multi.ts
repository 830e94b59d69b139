import { InvalidArgumentError } from '../../errors.js'
import type { LockContext } from '../handle.js'
import { validateKey } from '../options.js'

/** Most keys one `withLocks` call takes: each is a lock held (and renewed) for the whole call. */
export const MAX_KEYS_PER_CALL = 100

/** What `withLocks`' callback gets: every key's lock, in canonical order. */
export interface MultiLockContext<Resource = void> {
  /** The keys, deduplicated, in the canonical order they were taken in (UTF-16 code unit order). */
  readonly keys: readonly string[]
  /** Each key's fencing token. */
  readonly tokens: ReadonlyMap<string, bigint>
  /** Aborts with the first `LockLostError` when any of the locks is lost: stop writing. */
  readonly signal: AbortSignal
  /** One key's lock (`token`, `signal`, `extend`, `resource`); throws `InvalidArgumentError` for a key not taken here. */
  lock(key: string): LockContext<Resource>
}

/**
 * The keys of a `withLocks` call, validated (`keys[i]` named in the error), deduplicated and
 * sorted in one canonical order: two calls asking for `[a, b]` and `[b, a]` take them in
 * the same order, so neither can hold one while waiting for the other's.
 */
export function canonicalKeys(keys: unknown, maxKeyLength: number): string[] {
  if (!Array.isArray(keys)) throw new InvalidArgumentError('keys', `expected an array of keys, got ${typeof keys}`)
  if (keys.length === 0) throw new InvalidArgumentError('keys', 'must not be empty')
  if (keys.length > MAX_KEYS_PER_CALL)
    throw new InvalidArgumentError('keys', `has ${keys.length} keys; at most ${MAX_KEYS_PER_CALL} per call`)
  const checked = keys.map((key: unknown, i) => {
    try {
      return validateKey(key, maxKeyLength)
    } catch (error) {
      if (error instanceof InvalidArgumentError)
        throw new InvalidArgumentError(`keys[${i}]`, error.message.replace(/^key: /, ''))
      throw error
    }
  })
  return [...new Set(checked)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}

/** The context for `fn`, over the handles taken (or reused from the call chain), by key. */
export function multiContext<Resource>(
  keys: readonly string[],
  locks: ReadonlyMap<string, LockContext<Resource>>,
  signal: AbortSignal,
): MultiLockContext<Resource> {
  let tokens: Map<string, bigint> | undefined
  return {
    keys,
    get tokens() {
      // Read lazily: a backend without tokens (Redlock) throws FencingUnsupportedError only when asked.
      return (tokens ??= new Map(keys.map((key) => [key, locks.get(key)!.token])))
    },
    signal,
    lock(key) {
      const lock = locks.get(key)
      if (!lock) throw new InvalidArgumentError('key', `${JSON.stringify(key)} is not one of this call's keys`)
      return lock
    },
  }
}
