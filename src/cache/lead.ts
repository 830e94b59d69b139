import { LoadContext, type Loader } from '../context.js'
import { entryFrom, fallbackValid, type Entry } from '../entry.js'
import { encodeFailure } from '../loader-error.js'
import { LoaderTimeoutError } from '../errors.js'
import { LOAD_SCOPE } from '../observability/load-scope.js'
import { warnUncacheableOnce } from '../refusal-warnings.js'
import { entryKeys } from '../redis/keys.js'
import { Lease } from '../redis/lease.js'
import type { Lookup } from '../redis/store.js'
import type { TagRefusal } from '../redis/tags.js'
import { withTimeout } from '../timers.js'
import { type Call, type Claim, type FlightNotes, type Resolution, NEVER_ABORTED } from './call.js'
import { CacheState } from './state.js'
import { commitTagged, type TaggedCommit } from './tags.js'

/** Leading a load: the loader under the lease, then the fenced commit (or the release of the lock on failure). */
export abstract class LoadLeader extends CacheState {
  /**
   * Runs the loader and stores its result: in Redis when `claim` is given (fenced
   * commit, lock released, waiters notified in the same script), else in L1 only.
   * A load is given up after `lock.maxHold`, so a loader that never settles cannot pin
   * its key, and a result that late is never stored (the delete fence lasts that long).
   */
  protected async lead(call: Call, claim: Claim | undefined, notes: FlightNotes): Promise<Resolution> {
    const { key } = call
    if (claim) this.events.emit('leader', { key })
    const { lease: leaseMs, maxHold } = this.settings.lock
    const lease =
      claim?.lockValue && this.store
        ? new Lease(this.store, claim.keys, claim.lockValue, leaseMs, maxHold, key, claim.lockedAt, (reason) =>
            this.events.emit('lock-lost', { key, reason }),
          )
        : undefined
    const context = new LoadContext(key, lease?.signal ?? NEVER_ABORTED, notes.fallback?.value, call.policy, {
      background: call.background,
    })
    // A background loader starts after the caller that triggered it has its stale answer.
    if (call.background) await new Promise((resolve) => setImmediate(resolve))
    const startedAt = performance.now()
    let value: unknown
    try {
      value = await withTimeout(
        this.runLoader(call.loader, context),
        maxHold,
        () => new LoaderTimeoutError(key, maxHold, 'lock.maxHold'),
      )
    } catch (error) {
      lease?.storingResult()
      this.events.emit('load', { key, durationMs: performance.now() - startedAt, error })
      return this.loadFailed(call, claim, error, notes.fallback).finally(() => void lease?.stop())
    }
    lease?.storingResult() // renewed until the commit is done: it may queue behind others
    const loadMs = performance.now() - startedAt
    this.events.emit('load', { key, durationMs: loadMs })
    return this.storeLoaded(call, claim, value, context, loadMs).finally(() => void lease?.stop())
  }

  /** Encodes and stores a loaded value; the callers get it whatever happens to the write. */
  protected async storeLoaded(
    call: Call,
    claim: Claim | undefined,
    value: unknown,
    context: LoadContext<unknown>,
    loadMs: number,
  ): Promise<Resolution> {
    const { key } = call
    const tags =
      call.tags || context.tags.length > 0 ? [...new Set([...(call.tags ?? []), ...context.tags])] : undefined
    const loaded: Resolution = { value, outcome: 'loaded', shareable: context.skip?.share ?? true }
    if (tags) loaded.loadedUnder = { tags, epoch: call.epoch }
    let data: string | Buffer | undefined
    if (context.skip) {
      this.events.emit('uncacheable', { key, reason: 'the loader called doNotCache()' })
    } else if (value === undefined) {
      this.events.emit('uncacheable', { key, reason: 'the loader returned undefined (return null to cache "nothing")' })
    } else {
      try {
        data = this.encode(key, value)
      } catch (error) {
        this.events.emit('uncacheable', { key, reason: (error as Error).message, error })
        warnUncacheableOnce(this, key, error)
      }
    }
    if (data === undefined) {
      // Waiters elsewhere cannot receive this value: they run their own loaders.
      if (claim?.lockValue)
        await this.store?.release(claim.keys, claim.lockValue, 'u|', { passMs: context.skip?.passMs }).catch(() => {})
      return loaded
    }

    const life = this.jittered(context.lifetimes(loadMs))
    // L1's copy counts its life from before the commit was sent: Redis's, from when the commit ran (later).
    let committedAt = performance.now()
    let written = true
    let version: string | undefined
    if (this.store) {
      const store = this.store
      const keys = claim?.keys ?? entryKeys(this.settings.namespace, key)
      const request = { lockValue: claim?.lockValue ?? '', token: claim?.token ?? '', data, ...life }
      // Without a claim's lookup, the server clock's estimate less the load time (commitTagged checks it).
      const now = store.clock.now()
      const tagged =
        tags &&
        this.tagged(tags, claim?.serverAt ?? (now === undefined ? undefined : now - loadMs), performance.now() - loadMs)
      let refused: TagRefusal | undefined
      const commit = tagged
        ? async () => {
            const outcome = await commitTagged(store, this.tagStore!, keys, key, request, tagged)
            refused = outcome.refused
            return outcome.version
          }
        : () => store.commit(keys, request)
      committedAt = performance.now()
      try {
        version = await commit()
        written = version !== undefined
        if (!written) await this.notStored(key, claim, refused)
      } catch {
        // Redis is unavailable: keep the value in L1; the lock expires by itself. If it is a
        // failover, commit again once the promoted node serves (fenced, so harmless if late),
        // so waiters elsewhere get the value instead of waiting out our lock. Within one lease:
        // after that the lock is gone and they have reloaded.
        if (claim?.lockValue) {
          const { lease, pollInterval } = this.settings.lock
          this.committing.add(key) // the next flight of the key waits the failover out for it (see request.ts)
          this.track(
            store
              .throughFailover(commit, performance.now() + lease, pollInterval, { key: keys.entry })
              .then((late) => (late === undefined ? this.notStored(key, claim, refused) : undefined)),
            () => this.committing.delete(key),
          )
        }
      }
    }
    if (written) {
      this.rememberTagged(call, entryFrom(value, life, committedAt, version, data.length), tags)
      this.refreshHolds.delete(key) // the next early refresh is due for this new value
    }
    return loaded
  }

  /** What a tagged commit needs besides its tags and the load's start (server ms). */
  protected tagged(tags: readonly string[], startedAt: number | undefined, startedLocal: number): TaggedCommit {
    const {
      maxKeysPerTag,
      tagClockSkew: clockSkew,
      lock: { lease },
      redisTimeout,
    } = this.settings
    return {
      tags,
      startedAt,
      startedLocal,
      maxKeysPerTag,
      clockSkew,
      lease,
      retentionMs: this.retentionMs,
      redisTimeout,
    }
  }

  /**
   * A commit that did not happen: fenced by a newer value or an invalidation, or refused by
   * a tag (invalidated since the load began, or full). A refused commit never ran, so the
   * lock is still ours: waiters re-check ('r|': one of them reloads), or, for a full tag,
   * run their own loaders ('u|': nothing could be stored for them).
   */
  protected async notStored(key: string, claim: Claim | undefined, refused: TagRefusal | undefined): Promise<void> {
    if (refused === 'full')
      this.events.emit('uncacheable', {
        key,
        reason: `a tag of it already lists maxKeysPerTag (${this.settings.maxKeysPerTag}) keys`,
      })
    else this.events.emit('fenced', { key })
    if (refused && claim?.lockValue)
      await this.store?.release(claim.keys, claim.lockValue, refused === 'full' ? 'u|' : 'r|').catch(() => {})
  }

  protected async loadFailed(
    call: Call,
    claim: Claim | undefined,
    error: unknown,
    fallback: Entry | undefined,
  ): Promise<Resolution> {
    const { key, policy } = call
    const covered = fallbackValid(fallback, performance.now())
    if (claim?.lockValue) {
      const message = encodeFailure(error) // never throws, whatever the loader threw
      const marks = covered ? { backoffMs: policy.failSafeBackoff } : { negativeMs: policy.negativeTtl }
      await this.store?.release(claim.keys, claim.lockValue, message, marks).catch(() => {})
    }
    if (!covered || !fallbackValid(fallback, performance.now())) throw error // it may have run out during the release
    const retryAt = performance.now() + policy.failSafeBackoff
    fallback.backoffUntil = retryAt
    this.holdRefresh(key, retryAt)
    this.events.emit('fail-safe', { key, error })
    return this.stale(key, fallback, 'fail-safe')
  }

  /**
   * Runs a caller's own loader and stores nothing (hit-for-miss, or a leader's private
   * result). Bounded like a lead by lock.maxHold, and by what is left of the caller's
   * hardTimeout when it started waiting at `since`.
   */
  protected async loadUncached(call: Call, since = performance.now()): Promise<Resolution> {
    const { key, policy } = call
    const { maxHold } = this.settings.lock
    const hardLeft = policy.hardTimeout ? Math.max(0, policy.hardTimeout - (performance.now() - since)) : Infinity
    const context = new LoadContext(key, NEVER_ABORTED, undefined, policy, { uncached: true })
    const startedAt = performance.now()
    try {
      const loading = this.runLoader(call.loader, context)
      const value = await (hardLeft < maxHold
        ? withTimeout(loading, hardLeft, () => new LoaderTimeoutError(key, policy.hardTimeout))
        : withTimeout(loading, maxHold, () => new LoaderTimeoutError(key, maxHold, 'lock.maxHold')))
      this.events.emit('load', { key, durationMs: performance.now() - startedAt })
      return { value, outcome: 'loaded', shareable: false }
    } catch (error) {
      this.events.emit('load', { key, durationMs: performance.now() - startedAt, error })
      throw error
    }
  }

  /** Starts a loader on the next microtask, inside the load scope if one is installed. */
  protected runLoader(loader: Loader<unknown>, context: LoadContext<unknown>): Promise<unknown> {
    const scope = this[LOAD_SCOPE]
    return Promise.resolve().then(() => (scope ? scope(context, () => loader(context)) : loader(context)))
  }

  /** With lock.waitForReplicas: a lock fewer replicas acknowledged is used all the same (the weaker mode), and reported. */
  protected checkReplicated(key: string, found: Lookup): void {
    const wanted = this.settings.lock.waitForReplicas?.replicas
    if (wanted !== undefined && found.acknowledged !== undefined && found.acknowledged < wanted) {
      this.events.emit('lock-unreplicated', { key, acknowledged: found.acknowledged, wanted })
    }
  }

  /**
   * A grace refresh this process won the lock for, run after its flight answered stale.
   * Counted in `backgroundLeads` so that a delete() or set() meanwhile leaves a delete
   * marker, and the refresh cannot put the old value back into L1.
   */
  protected leadInBackground(call: Call, claim: Claim, notes: FlightNotes): void {
    const { key } = call
    this.backgroundLeads.set(key, (this.backgroundLeads.get(key) ?? 0) + 1)
    this.trackFlight(
      key,
      this.countRefresh(this.lead(call, claim, notes)).finally(() => {
        const left = (this.backgroundLeads.get(key) ?? 1) - 1
        if (left > 0) this.backgroundLeads.set(key, left)
        else this.backgroundLeads.delete(key)
      }),
    )
  }
}
