import { randomBytes } from 'node:crypto'
import type { Entry } from '../entry.js'
import { entryKeys, type EntryKeys } from './redis/keys.js'
import type { Subscription } from '../redis/notifier.js'
import { newerVersion } from './redis/record.js'
import type { Lookup, LookupMode } from './redis/store.js'
import type { Call, FlightNotes, Resolution } from './call.js'
import { LoadLeader } from './lead.js'

/** Slack for the round trip between reading an entry's remaining life and asking Redis. */
const REFRESH_TOLERANCE_MS = 50

/** Background refresh (grace, early refresh), and watchReload: a process in grace adopting another's commit. */
export abstract class Refresher extends LoadLeader {
  /** The request state machine (request.ts): a refresh whose copy left its grace carries on as a foreground flight. */
  protected abstract resolve(call: Call, notes: FlightNotes): Promise<Resolution>

  protected refreshInBackground(call: Call, mode: LookupMode, current: Entry): void {
    const now = performance.now()
    if (this.closed || now < (this.refreshHolds.get(call.key) ?? 0) || this.flights.has(call.key)) return
    if (this.refreshing >= this.settings.maxBackgroundRefreshes) return // the value in hand is served; a later read retries
    this.holdRefresh(call.key, now + this.settings.lock.lease)
    const refresh = { ...call, background: true }
    this.countRefresh(
      this.flights.start(call.key, { fallback: current }, () => this.refresh(refresh, mode, current)).promise,
    )
  }

  /** A background refresh: take the lock without waiting; someone else refreshing is fine. */
  protected async refresh(call: Call, mode: LookupMode, current: Entry): Promise<Resolution> {
    const notes: FlightNotes = { fallback: current }
    if (!this.store) return this.lead(call, undefined, notes)
    const keys = entryKeys(this.settings.namespace, call.key)
    const owner = randomBytes(16).toString('hex')
    // Skip the reload if Redis already holds a value fresher than ours (another process refreshed).
    const refreshBelow = current.freshUntil - performance.now() + REFRESH_TOLERANCE_MS
    let found: Lookup
    try {
      found = await this.store.getOrLock(keys, owner, this.settings.lock.lease, mode, this.retentionMs, refreshBelow)
    } catch {
      // Redis is unreachable, so every process would refresh on its own: while our copy may
      // still be served (fresh or in grace), keep serving it and spare the database that herd.
      const now = performance.now()
      if (now < current.graceUntil || now < current.freshUntil) {
        this.holdRefresh(call.key, now + this.settings.breaker.openFor)
        return { value: current.value, outcome: now < current.freshUntil ? 'hit' : 'stale', shareable: true }
      }
      return this.lead(call, undefined, notes)
    }
    const stored = this.decode(call.key, found)
    // Our copy is older than a delete's fence (its broadcast was missed): no answer and no
    // fallback any more, and out of L1 (unlessDeleted). The flight carries on without it.
    let kept = this.unlessDeleted(call.key, current, found.fence)
    if (!kept) notes.fallback = undefined
    if (stored && found.state === 'fresh' && found.lock !== 'won') {
      this.remember(call, stored)
      if (found.lock === 'held')
        this.watchReload(call, keys, stored, Number(found.lockArg)) // an early refresh elsewhere
      else this.refreshHolds.delete(call.key)
      return { value: stored.value, outcome: 'hit', shareable: true }
    }
    // Redis holds a newer value than ours, though already in grace itself: serve that one.
    if (stored && newerVersion(stored.version, current.version)) {
      this.remember(call, stored)
      current = kept = stored
      notes.fallback = stored
    }
    if (found.lock === 'won') {
      this.checkReplicated(call.key, found)
      return this.lead(
        call,
        {
          keys,
          token: found.lockArg,
          lockValue: `${owner}:${found.lockArg}`,
          lockedAt: found.sentAt,
          serverAt: found.serverNow,
        },
        notes,
      )
    }
    const now = performance.now()
    if (found.lock === 'held' && kept) this.watchReload(call, keys, current, Number(found.lockArg))
    else if (found.lock === 'backoff') this.holdRefresh(call.key, now + Number(found.lockArg))
    if (kept && now < kept.freshUntil) return { value: kept.value, outcome: 'hit', shareable: true }
    if (kept && now < kept.graceUntil) return { value: kept.value, outcome: 'stale', shareable: true }
    // Our copy left its grace (or was deleted) while we asked: callers that joined this flight
    // must not get it, so the flight carries on as a foreground one (wait for the other process's value).
    return this.resolve({ ...call, background: false }, notes)
  }

  /**
   * Another process holds the lock and reloads the key while this one serves `current`
   * (stale, or soon stale): listen on the key's channel and adopt the committed value from
   * its message. No refresh is tried meanwhile, but only for a delay derived from the
   * entry's measured load time (and how long the lock has been held), never a whole lease:
   * then the next call re-checks Redis, so a lost message costs about one load time.
   */
  protected watchReload(call: Call, keys: EntryKeys, current: Entry, lockPttl: number): void {
    const { lease, pollInterval, maxPollInterval } = this.settings.lock
    const heldFor = Math.max(0, lease - lockPttl)
    const waitMs = Math.min(lockPttl + 1, maxPollInterval, Math.max(pollInterval, 2 * current.loadMs, heldFor))
    const until = performance.now() + waitMs
    this.holdRefresh(call.key, until)
    // Past maxWaits only the hold stands: the next call after it re-checks Redis.
    if (this.watching.has(call.key) || !this.notifier || this.closed || this.waitsOpen >= this.settings.maxWaits) return
    const watch = { forgotten: false } // set by a delete() or set() meanwhile: then adopt nothing
    this.watching.set(call.key, watch)
    this.waitsOpen++
    this.track(
      (async () => {
        let subscription: Subscription | undefined
        try {
          subscription = await this.notifier!.subscribe(keys.channel)
          // A commit that landed before the subscription: its fresh copy is there (one GET).
          let entry =
            this.store && this.store.clock.now() !== undefined
              ? await this.readFresh(call.key, keys, this.store)
              : undefined
          if (!entry || !newerVersion(entry.version, current.version)) {
            const message = await subscription.next(until - performance.now())
            entry = message ? await this.committedEntry(call.key, keys, message) : undefined
          }
          if (entry && !watch.forgotten && newerVersion(entry.version, current.version)) this.remember(call, entry)
        } catch {
          // Redis unavailable: the hold runs out and the next call re-checks.
        } finally {
          subscription?.release()
          this.waitsOpen--
          this.watching.delete(call.key)
          if (this.refreshHolds.get(call.key) === until) this.refreshHolds.delete(call.key)
        }
      })(),
    )
  }
}
