import { EventEmitter } from 'node:events'

/** Why a stale value was served instead of a fresh one. */
export type StaleReason = 'grace' | 'fail-safe' | 'backoff' | 'soft-timeout' | 'hard-timeout' | 'wait-timeout'

/**
 * How a cross-process wait ended:
 * - `value`: the other process's value arrived (its commit message, or a fresh copy on re-check);
 * - `error`: the other process's load failed;
 * - `released`: the lock came free without a value; this process loads, or serves what it has;
 * - `timeout`: `waitTimeout` ran out;
 * - `failed`: Redis failed (or the cache closed) while waiting.
 */
export type WaitOutcome = 'value' | 'error' | 'released' | 'timeout' | 'failed'

/** Every event the cache emits, with its payload. Each also bumps a counter of the same name in `stats()`. */
export interface CacheEvents {
  /** A fresh value was served. */
  hit: { key: string; tier: 'l1' | 'redis' }
  /** A stale value was served. */
  stale: { key: string; reason: StaleReason }
  /** Neither tier had a usable value. */
  miss: { key: string }
  /** This process won the lock and will run the loader. */
  leader: { key: string }
  /** Another process holds the lock; this process waits for its result. */
  wait: { key: string }
  /** That wait ended, `durationMs` after its `wait` event. */
  waited: { key: string; durationMs: number; outcome: WaitOutcome }
  /**
   * Another process holds the lock, and a budget was full (`waits` of it were running).
   * `polled: true`: past `maxWaits`, this wait does not subscribe and is answered by the
   * shared poll. `polled: false`: past `maxPendingWaits`, it did not wait at all (a stale
   * value, else `LockWaitTimeoutError`; never its own loader).
   */
  'wait-capped': { key: string; waits: number; polled: boolean }
  /**
   * Work was shared instead of repeated: a caller joined a flight already running in this
   * process for its key (`from: 'process'`, once per joining caller, whatever that flight
   * answers), or this process's flight got the value another process loaded, from its
   * commit message (`from: 'remote'`, once per flight).
   */
  coalesced: { key: string; from: 'process' | 'remote' }
  /** A loader finished; `error` is set when it failed. */
  load: { key: string; durationMs: number; error?: unknown }
  /** A loader failed but a stale value covered it. */
  'fail-safe': { key: string; error: unknown }
  /** softTimeout, hardTimeout or waitTimeout elapsed. */
  timeout: { key: string; kind: 'soft' | 'hard' | 'wait' }
  /** A loaded value was not stored: unencodable, `undefined`, or the loader said doNotCache. */
  uncacheable: { key: string; reason: string; error?: unknown }
  /** Foreign, malformed or out-of-range data at an entry's keys; left out (a miss, overwritten) and repaired (docs/resilience.md). */
  corrupt: { key: string; error?: unknown }
  /** A late commit was refused because a newer value (or an invalidation) got there first. */
  fenced: { key: string }
  /**
   * A tag invalidation reached this process's L1: its own `deleteByTag` (`process`), or
   * another process's broadcast (`remote`).
   */
  'tag-invalidated': { tag: string; from: 'process' | 'remote' }
  /** With `lock.waitForReplicas`: the lock was taken, but fewer replicas than asked acknowledged it in time. */
  'lock-unreplicated': { key: string; acknowledged: number; wanted: number }
  /** The lock was lost while the loader ran (its AbortSignal fired). */
  'lock-lost': { key: string; reason: string }
  /** A Redis command failed or timed out; the call carried on without Redis. */
  'redis-error': { operation: string; error: unknown }
  /** The circuit breaker opened: Redis is skipped until it closes. */
  'circuit-open': { failures: number }
  /** The circuit breaker closed again after a successful probe. */
  'circuit-close': Record<string, never>
  /**
   * A server setting weakens the guarantees (read once at start-up, where CONFIG is allowed):
   * `maxmemory-policy` other than `noeviction` can evict locks, fences and delete tombstones.
   */
  'config-warning': { setting: string; value: string; message: string }
  /**
   * A namespace (`namespace`), or every namespace (`namespace` undefined: the cache's own
   * `clear()`), was cleared: by this process (`process`), or by another, whose bump reached this
   * one over pub/sub or was found on a re-read of the generation (`remote`). This process's L1
   * copies of it are dropped by then (docs/namespaces.md).
   */
  'namespace-cleared': { namespace: string | undefined; from: 'process' | 'remote' }
  /**
   * A durable `delete()` could not reach Redis and was queued in the delete outbox (`queued`:
   * its entries now, this one included). Replayed once Redis answers (docs/durable-deletes.md).
   */
  'delete-queued': { key: string; queued: number }
  /**
   * A queued delete was replayed: `erased` false when Redis held a value newer than the delete
   * (loaded or set after it was asked for), which is kept.
   */
  'delete-replayed': { key: string; erased: boolean }
  /**
   * A durable delete was given up: the outbox was full (`outbox-full`: the delete rejected with
   * `RedisUnavailableError`, nothing queued), or the cache closed before it could be replayed (`closed`).
   */
  'delete-dropped': { key: string; reason: 'outbox-full' | 'closed' }
}

export type CacheEventName = keyof CacheEvents
export type CacheStats = Record<CacheEventName, number>

const EVENT_NAMES: CacheEventName[] = [
  'hit',
  'stale',
  'miss',
  'leader',
  'wait',
  'waited',
  'wait-capped',
  'coalesced',
  'load',
  'fail-safe',
  'timeout',
  'uncacheable',
  'corrupt',
  'fenced',
  'tag-invalidated',
  'lock-unreplicated',
  'lock-lost',
  'redis-error',
  'circuit-open',
  'circuit-close',
  'config-warning',
  'namespace-cleared',
  'delete-queued',
  'delete-replayed',
  'delete-dropped',
]

/** A typed emitter that also counts. Emitting with no listener costs one increment. */
export class CacheEmitter {
  private readonly emitter = new EventEmitter()
  private readonly counters = Object.fromEntries(EVENT_NAMES.map((name) => [name, 0])) as CacheStats

  on<E extends CacheEventName>(event: E, listener: (payload: CacheEvents[E]) => void): () => void {
    this.emitter.on(event, listener)
    return () => this.emitter.off(event, listener)
  }

  emit<E extends CacheEventName>(event: E, payload: CacheEvents[E]): void {
    if (this.count(event)) this.deliver(event, payload)
  }

  /**
   * Counts `event` and says whether anyone listens; only then need its payload be made
   * and passed to `deliver` (the Redis hit path makes none for nobody).
   */
  count(event: CacheEventName): boolean {
    this.counters[event]++
    return this.emitter.listenerCount(event) > 0
  }

  deliver<E extends CacheEventName>(event: E, payload: CacheEvents[E]): void {
    try {
      this.emitter.emit(event, payload)
    } catch {
      // A throwing listener must not break a cache call.
    }
  }

  stats(): CacheStats {
    return { ...this.counters }
  }

  removeAll(): void {
    this.emitter.removeAllListeners()
  }
}
