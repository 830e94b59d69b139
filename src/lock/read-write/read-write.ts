import { InvalidArgumentError, LockUpgradeError } from '../../errors.js'
import type { HeldLockHandle, LockContext, LockHandle } from '../handle.js'
import type { LockCallOptions } from '../options.js'

/** What a `ReadWriteLock` needs of the `Locks` it belongs to. */
export interface ReadWriteFront<Resource> {
  /** The hold of this call chain under `chainKey`, if any and not ended. */
  held(chainKey: string): LockHandle<Resource> | undefined
  /** Takes one side, waiting up to the options' `wait`; rejects `LockBusyError` when it stays busy. */
  take(side: 'read' | 'write', chainKey: string, options: LockCallOptions | undefined): Promise<LockHandle<Resource>>
  /** Runs `fn` with `handle` in the chain under `chainKey`, then releases it. */
  holding<T>(chainKey: string, handle: LockHandle<Resource>, fn: () => T | Promise<T>): Promise<T>
}

/**
 * Many readers or one writer, across processes (`locks.readWrite(name)`).
 *
 * - **Writers first.** A writer that finds readers in queues a claim that keeps *new*
 *   readers out; the readers inside finish, and the writer gets in. So a stream of readers
 *   cannot starve a writer; a stream of writers can delay readers (each writer gets in
 *   before readers that came after it).
 * - **Each holder has its own lease**, renewed by its own watchdog: a reader that dies is
 *   dropped when its own lease ends, however busy the other readers are.
 * - **Within one call chain** (`read(fn)`, `write(fn)`): a `read` or `write` inside a
 *   `write`, or a `read` inside a `read`, runs under the outer hold (a second read lock
 *   would queue behind a waiting writer that waits for the first: a deadlock). A `write`
 *   inside a `read` rejects at once with `LockUpgradeError`: it would wait for itself.
 *   `acquireRead()` / `acquireWrite()` give a handle for `await using`; they see the chain
 *   of a surrounding `read(fn)`/`write(fn)` too, but start none.
 *
 * Options are the mutex's (`lease`, `wait`, `signal`; `reentrant` is implied, see above).
 */
export class ReadWriteLock<Resource = void> {
  private readonly readKey: string
  private readonly writeKey: string

  constructor(
    readonly name: string,
    private readonly front: ReadWriteFront<Resource>,
  ) {
    this.readKey = `\u0000rw-read\u0000${name}`
    this.writeKey = `\u0000rw-write\u0000${name}`
  }

  /** Runs `fn` holding a read lock (shared with other readers); releases it when `fn` settles. */
  async read<T>(fn: (lock: LockContext<Resource>) => T | Promise<T>, options?: LockCallOptions): Promise<T> {
    checkFn(fn)
    const outer = this.front.held(this.writeKey) ?? this.front.held(this.readKey)
    if (outer) return fn(outer.nested())
    const handle = await this.front.take('read', this.readKey, options)
    return this.front.holding(this.readKey, handle, () => fn(handle))
  }

  /** Runs `fn` holding the write lock (alone); releases it when `fn` settles. */
  async write<T>(fn: (lock: LockContext<Resource>) => T | Promise<T>, options?: LockCallOptions): Promise<T> {
    checkFn(fn)
    const outer = this.outerForWrite()
    if (outer) return fn(outer.nested())
    const handle = await this.front.take('write', this.writeKey, options)
    return this.front.holding(this.writeKey, handle, () => fn(handle))
  }

  /** A read lock to release yourself (`await using`, `release()`). */
  async acquireRead(options?: LockCallOptions): Promise<HeldLockHandle<Resource>> {
    const outer = this.front.held(this.writeKey) ?? this.front.held(this.readKey)
    if (outer) return outer.nested()
    return this.front.take('read', this.readKey, options)
  }

  /** The write lock, to release yourself (`await using`, `release()`). */
  async acquireWrite(options?: LockCallOptions): Promise<HeldLockHandle<Resource>> {
    const outer = this.outerForWrite()
    if (outer) return outer.nested()
    return this.front.take('write', this.writeKey, options)
  }

  private outerForWrite(): LockHandle<Resource> | undefined {
    if (this.front.held(this.readKey)) throw new LockUpgradeError(this.name)
    return this.front.held(this.writeKey)
  }
}

function checkFn(fn: unknown): void {
  if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `expected a function, got ${typeof fn}`)
}
