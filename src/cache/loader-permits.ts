import type { Cluster, Redis } from 'ioredis'
import { LoaderConcurrencyError, LockBusyError, RedisUnavailableError } from '../errors.js'
import type { CacheEmitter } from '../events.js'
import { createLocks } from '../lock/create-locks.js'
import type { Locks } from '../lock/locks.js'
import { timedOut } from '../lock/redis/bounded-call.js'
import type { HeldPermitsHandle, Semaphore } from '../lock/semaphore/semaphore.js'
import { LocalPermits } from './local-permits.js'

/**
 * Errors of loads whose loader never ran because the wait for a permit ended first (the
 * lead's signal aborted: its lease ran out in line). There is no failure to share: the
 * lead gives its lock back for the waiters to re-check, as on LoaderConcurrencyError.
 */
const NEVER_RAN = new WeakSet<object>()

/** Marks an error (the signal's reason) as having ended a load before its loader ran. */
function neverRan(error: unknown): unknown {
  if (typeof error === 'object' && error !== null) NEVER_RAN.add(error)
  return error
}

/** Did this error end a load before its loader ran (see NEVER_RAN)? */
export function endedBeforeLoading(error: unknown): boolean {
  return typeof error === 'object' && error !== null && NEVER_RAN.has(error)
}

/** The semaphore's name under the cache's namespace: one cap per namespace. */
const SEMAPHORE_NAME = 'loaders'

/**
 * `loaderConcurrency`: every loader run of the cache holds one permit of a Redis
 * counting semaphore shared by every process on the same namespace (the lock API's, with
 * its watchdog renewing the permit every lease/3 and its FIFO line of waiters), and, in
 * front of it, one of this process's own `limit` permits (`LocalPermits`): a process never
 * uses more than `limit` of the fleet's permits at once, so at most that many of its loads
 * stand in the Redis line, whatever the number waiting. A load that gets no permit in its
 * budget does not run.
 *
 * A slow answer is not an outage: a permit command that times out on a connected client is
 * sent again while the wait lasts, never turned into a load without a permit (that is when
 * the database needs the cap most). Only when Redis is unavailable (the connection down, a
 * failure other than a timeout, or a timeout while the cache's circuit breaker is open: its
 * own commands get no answers either) does a load run on its local permit alone: the
 * database then sees at most `limit` loads per process.
 */
export class LoaderPermits {
  private readonly locks: Locks<void>
  private readonly semaphore: Semaphore
  private readonly local: LocalPermits
  private readonly releasing = new Set<Promise<void>>()
  /** Loads of this cache waiting for a permit now, capped by `maxQueued`. */
  private queued = 0

  /** @internal */
  constructor(
    private readonly client: Redis | Cluster,
    namespace: string,
    private readonly limit: number,
    private readonly maxQueued: number,
    timing: { leaseMs: number; commandTimeoutMs: number },
    /** Whether the cache's circuit breaker is open (Redis judged unavailable). */
    private readonly breakerOpen: () => boolean,
    private readonly events: CacheEmitter,
  ) {
    this.locks = createLocks({
      redis: client,
      namespace,
      lease: timing.leaseMs,
      commandTimeout: timing.commandTimeoutMs,
    })
    this.semaphore = this.locks.semaphore(SEMAPHORE_NAME, { permits: limit })
    this.local = new LocalPermits(limit)
  }

  /**
   * Runs `load` holding a permit, after waiting up to `waitMs` for one; rejects with
   * `LoaderConcurrencyError` (without running `load`) when none came, and with `signal`'s
   * reason when it aborts first. Redis unavailable: `load` runs on this process's permit alone.
   */
  async run<T>(key: string, waitMs: number, signal: AbortSignal, load: () => T | Promise<T>): Promise<T> {
    const waits = this.queued < this.maxQueued
    const deadline = performance.now() + (waits ? waitMs : 0)
    let shared: HeldPermitsHandle | undefined
    this.queued++
    try {
      await this.takeLocal(key, waits ? waitMs : 0, signal)
      try {
        shared = await this.takeShared(key, waits ? waitMs : 0, deadline, signal)
      } catch (error) {
        this.local.give()
        throw error
      }
    } finally {
      this.queued--
    }
    try {
      return await load()
    } finally {
      this.local.give()
      // Not awaited by the load: its callers and its commit need not wait for the release's round trip.
      if (shared) this.giveBack(shared)
    }
  }

  private async takeLocal(key: string, waitMs: number, signal: AbortSignal): Promise<void> {
    let taken: boolean
    try {
      taken = await this.local.take(waitMs, signal)
    } catch (error) {
      throw neverRan(error)
    }
    if (!taken) throw new LoaderConcurrencyError(key, waitMs, this.limit)
  }

  /** The fleet's permit; undefined when Redis is unavailable (the local permit is the cap then). */
  private async takeShared(
    key: string,
    waitMs: number,
    deadline: number,
    signal: AbortSignal,
  ): Promise<HeldPermitsHandle | undefined> {
    for (;;) {
      if (this.client.status !== 'ready')
        return this.fallBack(new RedisUnavailableError(`loader permit not asked: connection is ${this.client.status}`))
      const leftMs = Math.max(0, Math.round(deadline - performance.now()))
      try {
        const permit =
          leftMs > 0
            ? await this.semaphore.acquire(1, { wait: leftMs, signal })
            : await this.semaphore.tryAcquire(1, { signal })
        if (permit) return permit
        throw new LoaderConcurrencyError(key, waitMs, this.limit)
      } catch (error) {
        if (signal.aborted) throw neverRan(error)
        if (error instanceof LockBusyError) throw new LoaderConcurrencyError(key, waitMs, this.limit)
        if (!(error instanceof RedisUnavailableError)) throw error
        if (!timedOut(error) || this.client.status !== 'ready' || this.breakerOpen()) return this.fallBack(error)
        // Not answered in time by a connected Redis that the cache's own commands still reach:
        // slow, not down (reported all the same). Ask again while the wait lasts.
        this.events.emit('redis-error', { operation: 'loaderConcurrency', error })
        if (performance.now() >= deadline) throw new LoaderConcurrencyError(key, waitMs, this.limit)
      }
    }
  }

  /** Redis is unavailable: the load runs on its local permit alone (reported). */
  private fallBack(error: RedisUnavailableError): undefined {
    this.events.emit('redis-error', { operation: 'loaderConcurrency', error })
    return undefined
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
