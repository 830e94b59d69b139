import type { Cluster, Redis } from 'ioredis'
import { LoaderConcurrencyError, LockBusyError } from '../errors.js'
import type { CacheEmitter } from '../events.js'
import { createLocks, type Locks } from '../lock/locks.js'
import type { HeldPermitsHandle, Semaphore } from '../lock/semaphore/semaphore.js'

/**
 * Errors of loads whose loader never ran because the wait for a permit ended first (the
 * lead's signal aborted: its lease ran out in line). There is no failure to share: the
 * lead gives its lock back for the waiters to re-check, as on LoaderConcurrencyError.
 */
const NEVER_RAN = new WeakSet<object>()

/** Did this error end a load before its loader ran (see NEVER_RAN)? */
export function endedBeforeLoading(error: unknown): boolean {
  return typeof error === 'object' && error !== null && NEVER_RAN.has(error)
}

/** The semaphore's name under the cache's namespace: one cap per namespace. */
const SEMAPHORE_NAME = 'loaders'

/**
 * `loaderConcurrency`: every loader run of the cache holds one permit of a Redis
 * counting semaphore shared by every process on the same namespace (the lock API's, with
 * its watchdog renewing the permit every lease/3 and its FIFO line of waiters). A load that
 * finds no permit waits in line; one that cannot get one in its budget does not run.
 */
export class LoaderPermits {
  private readonly locks: Locks<void>
  private readonly semaphore: Semaphore
  private readonly releasing = new Set<Promise<void>>()
  /** Loads of this cache waiting for a permit now, capped by `maxQueued`. */
  private queued = 0

  /** @internal */
  constructor(
    client: Redis | Cluster,
    namespace: string,
    private readonly limit: number,
    private readonly maxQueued: number,
    leaseMs: number,
    private readonly events: CacheEmitter,
  ) {
    this.locks = createLocks({ redis: client, namespace, lease: leaseMs })
    this.semaphore = this.locks.semaphore(SEMAPHORE_NAME, { permits: limit })
  }

  /**
   * Runs `load` holding a permit, after waiting up to `waitMs` for one; rejects with
   * `LoaderConcurrencyError` (without running `load`) when none came, and with `signal`'s
   * reason when it aborts first. Redis not answering: `load` runs without a permit.
   */
  async run<T>(key: string, waitMs: number, signal: AbortSignal, load: () => T | Promise<T>): Promise<T> {
    const permit = await this.take(key, waitMs, signal)
    try {
      return await load()
    } finally {
      // Not awaited by the load: its callers and its commit need not wait for the release's round trip.
      if (permit) this.giveBack(permit)
    }
  }

  private async take(key: string, waitMs: number, signal: AbortSignal): Promise<HeldPermitsHandle | undefined> {
    const waits = this.queued < this.maxQueued
    this.queued++
    try {
      const permit = waits
        ? await this.semaphore.acquire(1, { wait: waitMs, signal })
        : await this.semaphore.tryAcquire(1, { signal })
      if (!permit) throw new LoaderConcurrencyError(key, 0, this.limit)
      return permit
    } catch (error) {
      if (error instanceof LockBusyError) throw new LoaderConcurrencyError(key, waitMs, this.limit)
      if (signal.aborted && typeof error === 'object' && error !== null) NEVER_RAN.add(error)
      if (error instanceof LoaderConcurrencyError || signal.aborted) throw error
      this.events.emit('redis-error', { operation: 'loaderConcurrency', error })
      return undefined
    } finally {
      this.queued--
    }
  }

  private giveBack(permit: HeldPermitsHandle): void {
    // A permit that expired meanwhile (a long pause) is reported lost: nothing to give back.
    const release = permit.release().catch(() => {})
    this.releasing.add(release)
    void release.finally(() => this.releasing.delete(release))
  }

  /** Waits for the releases under way, then closes the semaphore's connections. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.releasing])
    await this.locks.close()
  }
}
