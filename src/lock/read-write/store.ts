import type { OneKeyLockBackend } from '../one-key-lock.js'

/**
 * A backend's read-write locks: two lock backends over one shared state per name, one
 * taking read locks (many at once) and one taking the write lock (alone). Each holder's
 * hold is its own: a `'lease'` hold (Redis) that the front's watchdog renews, or a
 * `'session'` hold (PostgreSQL: the transaction's connection).
 */
export interface ReadWriteStore {
  readonly readers: OneKeyLockBackend<unknown>
  readonly writers: OneKeyLockBackend<unknown>
  close(): Promise<void>
}
