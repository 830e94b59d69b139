import { newOwnerId } from './owner-ids.js'
import type { Entry } from '../entry.js'
import { entryKeys, type EntryKeys } from './redis/keys.js'
import type { Subscription } from '../redis/notifier.js'
import { newerVersion } from './redis/record.js'
import type { Lookup, LookupMode } from './redis/store.js'
import type { Call, FlightNotes, Resolution } from './call.js'
import type { CacheCore } from './core.js'
import type { LoadLeader } from './lead.js'

/** Slack for the round trip between reading an entry's remaining life and asking Redis. */
const REFRESH_TOLERANCE_MS = 50

/** A flight resolved in the foreground: what a caller that found nothing servable gets (resolve.ts). */
export type Foreground = (call: Call, notes: FlightNotes) => Promise<Resolution>

/** Background refresh (grace, early refresh), and watchReload: a process in grace adopting another's commit. */
export class Refresher {
  /**
   * `foreground`: a refresh whose copy left its grace while it asked Redis carries on as a
   * foreground flight, through it (the resolver, which itself starts refreshes through this).
   */
  constructor(
    private readonly core: CacheCore,
    private readonly leader: LoadLeader,
    private readonly foreground: Foreground,
  ) {}

  refreshInBackground(call: Call, mode: LookupMode, current: Entry): void {
    const { core } = this
    const now = performance.now()
    if (core.closed || now < (core.refreshHolds.get(call.key) ?? 0) || core.flights.has(call.key)) return
    if (core.refreshing >= core.settings.maxBackgroundRefreshes) return // the value in hand is served; a later read retries
    core.holdRefresh(call.key, now + core.settings.lock.lease)
    const refresh = { ...call, background: true }
    core.countRefresh(
      core.flights.start(call.key, { fallback: current }, () => this.refresh(refresh, mode, current)).promise,
    )
  }

  /** A background refresh: take the lock without waiting; someone else refreshing is fine. */
  async refresh(call: Call, mode: LookupMode, current: Entry): Promise<Resolution> {
    const { core } = this
    const notes: FlightNotes = { fallback: current }
    if (!core.store) return this.leader.lead(call, undefined, notes)
    const keys = entryKeys(core.settings.namespace, call.key)
    const owner = newOwnerId()
    // Skip the reload if Redis already holds a value fresher than ours (another process refreshed).
    const refreshBelow = current.freshUntil - performance.now() + REFRESH_TOLERANCE_MS
    let found: Lookup
    try {
      found = await core.store.getOrLock(keys, owner, core.settings.lock.lease, mode, core.retentionMs, refreshBelow)
    } catch {
      return this.unreachable(call, current, notes)
    }
    return this.refreshed(call, found, { keys, owner, current, notes })
  }

  /**
   * Redis is unreachable, so every process would refresh on its own: while our copy may
   * still be served (fresh or in grace), keep serving it and spare the database that herd.
   */
  private unreachable(call: Call, current: Entry, notes: FlightNotes): Promise<Resolution> | Resolution {
    const now = performance.now()
    if (now < current.graceUntil || now < current.freshUntil) {
      this.core.holdRefresh(call.key, now + this.core.settings.breaker.openFor)
      return { value: current.value, outcome: now < current.freshUntil ? 'hit' : 'stale', shareable: true }
    }
    return this.leader.lead(call, undefined, notes)
  }

  /** What a refresh does with the script's answer: adopt Redis's value, lead the reload, or serve ours on. */
  private refreshed(
    call: Call,
    found: Lookup,
    asked: { keys: EntryKeys; owner: string; current: Entry; notes: FlightNotes },
  ): Promise<Resolution> | Resolution {
    const { core } = this
    const { keys, owner, notes } = asked
    let { current } = asked
    const stored = core.entries.decode(call.key, found)
    // Our copy is older than a delete's fence (its broadcast was missed): no answer and no
    // fallback any more, and out of L1 (unlessDeleted). The flight carries on without it.
    let kept = core.entries.unlessDeleted(call.key, current, found.fence)
    if (!kept) notes.fallback = undefined
    if (stored && found.state === 'fresh' && found.lock !== 'won') {
      core.remember(call, stored)
      if (found.lock === 'held')
        this.watchReload(call, keys, stored, Number(found.lockArg)) // an early refresh elsewhere
      else core.refreshHolds.delete(call.key)
      return { value: stored.value, outcome: 'hit', shareable: true }
    }
    // Redis holds a newer value than ours, though already in grace itself: serve that one.
    if (stored && newerVersion(stored.version, current.version)) {
      core.remember(call, stored)
      current = kept = stored
      notes.fallback = stored
    }
    if (found.lock === 'won') {
      this.leader.checkReplicated(call.key, found)
      const lockValue = `${owner}:${found.lockArg}`
      const lock = { keys, token: found.lockArg, lockValue, lockedAt: found.sentAt, serverAt: found.serverNow }
      return this.leader.lead(call, lock, notes)
    }
    const now = performance.now()
    if (found.lock === 'held' && kept) this.watchReload(call, keys, current, Number(found.lockArg))
    else if (found.lock === 'backoff') core.holdRefresh(call.key, now + Number(found.lockArg))
    if (kept && now < kept.freshUntil) return { value: kept.value, outcome: 'hit', shareable: true }
    if (kept && now < kept.graceUntil) return { value: kept.value, outcome: 'stale', shareable: true }
    // Our copy left its grace (or was deleted) while we asked: callers that joined this flight
    // must not get it, so the flight carries on as a foreground one (wait for the other process's value).
    return this.foreground({ ...call, background: false }, notes)
  }

  /**
   * Another process holds the lock and reloads the key while this one serves `current`
   * (stale, or soon stale): listen on the key's channel and adopt the committed value from
   * its message. No refresh is tried meanwhile, but only for a delay derived from the
   * entry's measured load time (and how long the lock has been held), never a whole lease:
   * then the next call re-checks Redis, so a lost message costs about one load time.
   */
  watchReload(call: Call, keys: EntryKeys, current: Entry, lockPttl: number): void {
    const { core } = this
    const { lease, pollInterval, maxPollInterval } = core.settings.lock
    const heldFor = Math.max(0, lease - lockPttl)
    const waitMs = Math.min(lockPttl + 1, maxPollInterval, Math.max(pollInterval, 2 * current.loadMs, heldFor))
    const until = performance.now() + waitMs
    core.holdRefresh(call.key, until)
    // Past maxWaits only the hold stands: the next call after it re-checks Redis.
    if (core.watching.has(call.key) || !core.notifier || core.closed || !core.subscribedWaitFree()) return
    const watch = { forgotten: false } // set by a delete() or set() meanwhile: then adopt nothing
    core.watching.set(call.key, watch)
    core.waitsOpen++
    core.waitsSubscribed++
    core.track(
      this.adoptReload(call, keys, current, until, watch).finally(() => {
        core.waitsOpen--
        core.waitsSubscribed--
        core.watching.delete(call.key)
        if (core.refreshHolds.get(call.key) === until) core.refreshHolds.delete(call.key)
      }),
    )
  }

  /** watchReload's wait: the value another process commits before `until`, put into L1 unless forgotten meanwhile. */
  private async adoptReload(
    call: Call,
    keys: EntryKeys,
    current: Entry,
    until: number,
    watch: { forgotten: boolean },
  ): Promise<void> {
    const { store, entries } = this.core
    let subscription: Subscription | undefined
    try {
      subscription = await this.core.notifier!.subscribe(keys.channel)
      // A commit that landed before the subscription: its fresh copy is there (one GET).
      let entry = store && store.clock.now() !== undefined ? await entries.readFresh(call.key, keys, store) : undefined
      if (!entry || !newerVersion(entry.version, current.version)) {
        const message = await subscription.next(until - performance.now())
        entry = message ? await entries.committedEntry(call.key, keys, message) : undefined
      }
      if (entry && !watch.forgotten && newerVersion(entry.version, current.version)) this.core.remember(call, entry)
    } catch {
      // Redis unavailable: the hold runs out and the next call re-checks.
    } finally {
      subscription?.release()
    }
  }
}
