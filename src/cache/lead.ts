import { LoadContext, type Loader } from '../context.js'
import { storedSize } from '../stored-value.js'
import { entryFrom, fallbackValid, type Entry, type Lifetimes } from '../entry.js'
import { encodeFailure } from '../loader-error.js'
import { LoaderConcurrencyError, LoaderTimeoutError } from '../errors.js'
import { warnUncacheableOnce } from '../refusal-warnings.js'
import { entryKeys } from './redis/keys.js'
import { Lease } from './redis/lease.js'
import type { Lookup, RedisStore } from './redis/store.js'
import type { TagRefusal } from './redis/tags.js'
import { withTimeout } from '../timers.js'
import { type Call, type FlightNotes, type HeldEntryLock, type Resolution, NEVER_ABORTED } from './call.js'
import type { CacheCore } from './core.js'
import { endedBeforeLoading } from './loader-permits.js'
import { commitTagged, type TaggedCommit } from './tags.js'

/** How a loaded value's commit went: `written` unless it was fenced or refused (a Redis failure keeps it in L1). */
interface Committed {
  written: boolean
  version: string | undefined
  /** performance.now() when the commit was sent: L1's copy counts its life from then. */
  committedAt: number
}

/** Leading a load: the loader under the lease, then the fenced commit (or the release of the lock on failure). */
export class LoadLeader {
  constructor(private readonly core: CacheCore) {}

  /**
   * Runs the loader and stores its result: in Redis when `lock` is given (fenced commit,
   * lock released, waiters notified in the same script), else in L1 only. A load is given
   * up after `lock.maxHold`, so a loader that never settles cannot pin its key, and a result
   * that late is never stored (the delete fence lasts that long).
   */
  async lead(call: Call, lock: HeldEntryLock | undefined, notes: FlightNotes): Promise<Resolution> {
    const { key } = call
    const { events, store } = this.core
    if (lock) events.emit('leader', { key })
    const { lease: leaseMs, maxHold } = this.core.settings.lock
    const lease =
      lock?.lockValue && store
        ? new Lease(store, lock.keys, lock.lockValue, leaseMs, maxHold, key, lock.lockedAt, (reason) =>
            events.emit('lock-lost', { key, reason }),
          )
        : undefined
    const signal = lease ? () => lease.signal : NEVER_ABORTED // made only if the loader reads it
    const context = new LoadContext(key, signal, notes.fallback?.value, call.policy, { background: call.background })
    // A background loader starts after the caller that triggered it has its stale answer.
    if (call.background) await new Promise((resolve) => setImmediate(resolve))
    const startedAt = performance.now()
    let value: unknown
    try {
      value = await withTimeout(
        this.runLoader(call.loader, context, call.policy.waitTimeout),
        maxHold,
        () => new LoaderTimeoutError(key, maxHold, 'lock.maxHold'),
      )
    } catch (error) {
      lease?.storingResult()
      events.emit('load', { key, durationMs: performance.now() - startedAt, error })
      return this.loadFailed(call, lock, error, notes.fallback).finally(() => void lease?.stop())
    }
    lease?.storingResult() // renewed until the commit is done: it may queue behind others
    const loadMs = performance.now() - startedAt
    events.emit('load', { key, durationMs: loadMs })
    return this.storeLoaded(call, lock, value, context, loadMs).finally(() => void lease?.stop())
  }

  /** Encodes and stores a loaded value; the callers get it whatever happens to the write. */
  private async storeLoaded(
    call: Call,
    lock: HeldEntryLock | undefined,
    value: unknown,
    context: LoadContext<unknown>,
    loadMs: number,
  ): Promise<Resolution> {
    const { key } = call
    const { store } = this.core
    const tags =
      call.tags || context.tags.length > 0 ? [...new Set([...(call.tags ?? []), ...context.tags])] : undefined
    const loaded: Resolution = { value, outcome: 'loaded', shareable: context.skip?.share ?? true }
    if (tags) loaded.loadedUnder = { tags, epoch: call.epoch }
    const data = this.encodeLoaded(key, value, context)
    if (data === undefined) {
      // Waiters elsewhere cannot receive this value: they run their own loaders.
      if (lock?.lockValue)
        await store?.release(lock.keys, lock.lockValue, 'u|', { passMs: context.skip?.passMs }).catch(() => {})
      return loaded
    }
    const life = this.core.jittered(context.lifetimes(loadMs))
    const { written, version, committedAt } = store
      ? await this.commitLoaded(store, call, lock, { data, life, tags, loadMs })
      : { written: true, version: undefined, committedAt: performance.now() }
    if (written) {
      this.core.rememberTagged(call, entryFrom(value, life, committedAt, version, storedSize(data)), tags)
      this.core.refreshHolds.delete(key) // the next early refresh is due for this new value
    }
    return loaded
  }

  /** The loaded value as stored; undefined, reported `uncacheable`, when it is not to be or cannot be. */
  private encodeLoaded(key: string, value: unknown, context: LoadContext<unknown>): string | Buffer | undefined {
    const { events } = this.core
    if (context.skip) {
      events.emit('uncacheable', { key, reason: 'the loader called doNotCache()' })
    } else if (value === undefined) {
      events.emit('uncacheable', { key, reason: 'the loader returned undefined (return null to cache "nothing")' })
    } else {
      try {
        return this.core.entries.encode(key, value)
      } catch (error) {
        events.emit('uncacheable', { key, reason: (error as Error).message, error })
        warnUncacheableOnce(this.core, key, error)
      }
    }
    return undefined
  }

  /** The fenced commit of a loaded value (tagged if it has tags), retried through a failover in the background. */
  private async commitLoaded(
    store: RedisStore,
    call: Call,
    lock: HeldEntryLock | undefined,
    loaded: { data: string | Buffer; life: Lifetimes; tags: string[] | undefined; loadMs: number },
  ): Promise<Committed> {
    const { key } = call
    const { data, life, tags, loadMs } = loaded
    const keys = lock?.keys ?? entryKeys(this.core.settings.namespace, key)
    const request = { lockValue: lock?.lockValue ?? '', token: lock?.token ?? '', data, ...life }
    // Without a lock's lookup, the server clock's estimate less the load time (commitTagged checks it).
    const now = store.clock.now()
    const tagged =
      tags &&
      this.tagged(tags, lock?.serverAt ?? (now === undefined ? undefined : now - loadMs), performance.now() - loadMs)
    // A forced refresh replaces a value other processes may hold fresh in L1: they drop it.
    const broadcast = call.force ? this.core.forgetMessage(key) : undefined
    let refused: TagRefusal | undefined
    const commit = tagged
      ? async () => {
          const outcome = await commitTagged(store, this.core.tagStore!, keys, key, request, tagged, broadcast)
          refused = outcome.refused
          return outcome.version
        }
      : () => store.commit(keys, request, broadcast)
    const committedAt = performance.now()
    try {
      const version = await commit()
      if (version === undefined) await this.notStored(key, lock, refused)
      return { written: version !== undefined, version, committedAt }
    } catch {
      // Redis is unavailable: keep the value in L1; the lock expires by itself. If it is a
      // failover, commit again once the promoted node serves (fenced, so harmless if late),
      // so waiters elsewhere get the value instead of waiting out our lock. Within one lease:
      // after that the lock is gone and they have reloaded.
      if (lock?.lockValue) {
        const { lease, pollInterval } = this.core.settings.lock
        this.core.committing.add(key) // the next flight of the key waits the failover out for it (see resolve.ts)
        this.core.track(
          store
            .throughFailover(commit, performance.now() + lease, pollInterval, { key: keys.entry })
            .then((late) => (late === undefined ? this.notStored(key, lock, refused) : undefined)),
          () => this.core.committing.delete(key),
        )
      }
      return { written: true, version: undefined, committedAt }
    }
  }

  /** What a tagged commit needs besides its tags and the load's start (server ms). */
  tagged(tags: readonly string[], startedAt: number | undefined, startedLocal: number): TaggedCommit {
    const {
      maxKeysPerTag,
      tagClockSkew: clockSkew,
      lock: { lease },
      redisTimeout,
    } = this.core.settings
    return {
      tags,
      startedAt,
      startedLocal,
      maxKeysPerTag,
      clockSkew,
      lease,
      retentionMs: this.core.retentionMs,
      redisTimeout,
    }
  }

  /**
   * A commit that did not happen: fenced by a newer value or an invalidation, or refused by
   * a tag (invalidated since the load began, or full). A refused commit never ran, so the
   * lock is still ours: waiters re-check ('r|': one of them reloads), or, for a full tag,
   * run their own loaders ('u|': nothing could be stored for them).
   */
  async notStored(key: string, lock: HeldEntryLock | undefined, refused: TagRefusal | undefined): Promise<void> {
    const { events, settings, store } = this.core
    if (refused === 'full')
      events.emit('uncacheable', {
        key,
        reason: `a tag of it already lists maxKeysPerTag (${settings.maxKeysPerTag}) keys`,
      })
    else events.emit('fenced', { key })
    if (refused && lock?.lockValue)
      await store?.release(lock.keys, lock.lockValue, refused === 'full' ? 'u|' : 'r|').catch(() => {})
  }

  private async loadFailed(
    call: Call,
    lock: HeldEntryLock | undefined,
    error: unknown,
    fallback: Entry | undefined,
  ): Promise<Resolution> {
    const { key, policy } = call
    const covered = fallbackValid(fallback, performance.now())
    if (lock?.lockValue && (error instanceof LoaderConcurrencyError || endedBeforeLoading(error))) {
      // The loader never ran (no permit in time, or the lease ran out in line): no failure to
      // share or cache; waiters re-check, and one of them leads.
      await this.core.store?.release(lock.keys, lock.lockValue, 'r|').catch(() => {})
    } else if (lock?.lockValue) {
      const message = encodeFailure(error) // never throws, whatever the loader threw
      const marks = covered ? { backoffMs: policy.failSafeBackoff } : { negativeMs: policy.negativeTtl }
      await this.core.store?.release(lock.keys, lock.lockValue, message, marks).catch(() => {})
    }
    if (!covered || !fallbackValid(fallback, performance.now())) throw error // it may have run out during the release
    const retryAt = performance.now() + policy.failSafeBackoff
    fallback.backoffUntil = retryAt
    this.core.holdRefresh(key, retryAt)
    this.core.events.emit('fail-safe', { key, error })
    return this.core.stale(key, fallback, 'fail-safe')
  }

  /**
   * Runs a caller's own loader and stores nothing (hit-for-miss, or a leader's private
   * result). Bounded like a lead by lock.maxHold, and by what is left of the caller's
   * hardTimeout when it started waiting at `since`.
   */
  async loadUncached(call: Call, since = performance.now()): Promise<Resolution> {
    const { key, policy } = call
    const { events } = this.core
    const { maxHold } = this.core.settings.lock
    const hardLeft = policy.hardTimeout ? Math.max(0, policy.hardTimeout - (performance.now() - since)) : Infinity
    const context = new LoadContext(key, NEVER_ABORTED, undefined, policy, { uncached: true })
    const startedAt = performance.now()
    try {
      const loading = this.runLoader(call.loader, context, policy.waitTimeout)
      const value = await (hardLeft < maxHold
        ? withTimeout(loading, hardLeft, () => new LoaderTimeoutError(key, policy.hardTimeout))
        : withTimeout(loading, maxHold, () => new LoaderTimeoutError(key, maxHold, 'lock.maxHold')))
      events.emit('load', { key, durationMs: performance.now() - startedAt })
      return { value, outcome: 'loaded', shareable: false }
    } catch (error) {
      events.emit('load', { key, durationMs: performance.now() - startedAt, error })
      throw error
    }
  }

  /**
   * Starts a loader on the next microtask, inside the load scope if one is installed; with
   * `loaderConcurrency`, once it holds a permit (waiting for one up to `waitMs`).
   */
  private runLoader(loader: Loader<unknown>, context: LoadContext<unknown>, waitMs: number): Promise<unknown> {
    const scope = this.core.loadScope
    const run = () => (scope ? scope(context, () => loader(context)) : loader(context))
    const permits = this.core.loaderPermits
    return permits ? permits.run(context.key, waitMs, context.signal, run) : Promise.resolve().then(run)
  }

  /** With lock.waitForReplicas: a lock fewer replicas acknowledged is used all the same (the weaker mode), and reported. */
  checkReplicated(key: string, found: Lookup): void {
    const wanted = this.core.settings.lock.waitForReplicas?.replicas
    if (wanted !== undefined && found.acknowledged !== undefined && found.acknowledged < wanted) {
      this.core.events.emit('lock-unreplicated', { key, acknowledged: found.acknowledged, wanted })
    }
  }

  /**
   * A grace refresh this process won the lock for, run after its flight answered stale.
   * Counted in `backgroundLeads` so that a delete() or set() meanwhile leaves a delete
   * marker, and the refresh cannot put the old value back into L1.
   */
  leadInBackground(call: Call, lock: HeldEntryLock, notes: FlightNotes): void {
    const { key } = call
    const { backgroundLeads } = this.core
    backgroundLeads.set(key, (backgroundLeads.get(key) ?? 0) + 1)
    this.core.trackFlight(
      key,
      this.core.countRefresh(this.lead(call, lock, notes)).finally(() => {
        const left = (backgroundLeads.get(key) ?? 1) - 1
        if (left > 0) backgroundLeads.set(key, left)
        else backgroundLeads.delete(key)
      }),
    )
  }
}
