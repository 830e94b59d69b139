import type { OneKeyLockBackend } from '../one-key-lock.js'

/**
 * A backend's read-write locks: two lock backends over one shared state per name, one
 * taking read locks (many at once) and one taking the write lock (alone). Their held locks
 * are `'lease'` holds, so the front's watchdog renews each holder's own lease.
 */
export interface ReadWriteStore {
  readonly readers: OneKeyLockBackend<unknown>
  readonly writers: OneKeyLockBackend<unknown>
  close(): Promise<void>
}
