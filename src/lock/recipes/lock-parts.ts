import type { LockBackend } from '../backend.js'
import type { LockHandle } from '../handle.js'
import type { LockSettings } from '../options.js'
import type { TakeRoute, TakeSettings } from '../taker.js'

/**
 * What the recipes built on `Locks` (several keys at once, semaphores, read-write locks,
 * elections) take and hold locks with: the `Locks` object's own machinery, handed to each
 * recipe's factory so that none of it has to be public on the class.
 */
export interface LockParts<Resource> {
  readonly backend: LockBackend<Resource>
  /** The defaults every call starts from. */
  readonly settings: LockSettings
  /** Aborted by `close()`: ends waits, and refuses new calls. */
  readonly closing: AbortSignal
  /** Resolves the handle, `undefined` when busy after no wait; rejects `LockBusyError` when a wait ran out. */
  take(key: string, settings: TakeSettings, route?: TakeRoute<Resource>): Promise<LockHandle<Resource> | undefined>
  /** Takes `keys` (one atomic run of the backend) in one step; the handles in key order. */
  takeAll(keys: readonly string[], settings: TakeSettings): Promise<LockHandle<Resource>[]>
  /** Runs `fn` with `held` in the call chain (by chain key), then releases them all. */
  holding<T>(held: readonly (readonly [string, LockHandle<Resource>])[], fn: () => T | Promise<T>): Promise<T>
  /** The hold of this call chain under `key`, if any and not ended (for `reentrant`). */
  heldInChain(key: string): LockHandle<Resource> | undefined
}
