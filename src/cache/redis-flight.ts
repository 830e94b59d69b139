import { newOwnerId } from './owner-ids.js'
import type { Entry } from '../entry.js'
import { LoaderConcurrencyError, RedisUnavailableError, RemoteLoaderError } from '../errors.js'
import type { FreshRead } from './redis/fresh-reads.js'
import type { Lookup, LookupMode, RedisStore } from './redis/store.js'
import type { Call, FlightNotes, HeldEntryLock, Resolution } from './call.js'
import { endedBeforeLoading } from './loader-permits.js'
import type { FirstLookup } from './batched-lookups.js'
import { type FlightParts, PARKED, type Step, WaitingFlight } from './flight-wait.js'

/** The flight's first lookup answered (or failed): from now on its joined callers' waitTimeouts run. */
function lookedUp(notes: FlightNotes): void {
  const postponed = notes.lookingUp
  notes.lookingUp = false
  if (Array.isArray(postponed)) for (const resume of postponed) resume()
}

/**
 * A flight after its fresh read found nothing: the get-or-lock script, asked until one of
 * its answers settles the flight. Each kind of answer has its method (fresh, backoff, won,
 * held), and a wait on another process's load is a `Wait`, started, parked and given up by
 * the methods of `WaitingFlight` (flight-wait.ts), which also holds the state the two share.
 *
 * The loop, as callbacks rather than one async function, so that a waiting flight holds no
 * suspended call chain (20,000 waits held 4.5 KB each that way), only this object and its Wait:
 *
 *     start ─▶ lookUpNext ─▶ answer ─▶ take ─┬─ Resolution / own load ─▶ finish (settles the caller)
 *                 ▲                          ├─ undefined (look up again) ─▶ lookUpNext
 *                 │                          ├─ a promise of a step ─▶ take, once it comes
 *                 │                          └─ PARKED ─▶ … ─▶ woken ─▶ afterPause ─▶ take
 *                 └──────────── any failure ─▶ failed (unreachable) ─▶ finish
 */
export class RedisFlight extends WaitingFlight {
  private mode: LookupMode
  /** A forced refresh that found the lock held: the version then stored, which that load's commit replaces. */
  private versionWhenHeld: string | undefined
  /** A lookup of `owner` got no answer: it may take the lock yet. Undone once the flight is done with `owner`. */
  private abandoned = false
  /** The lock is the lead's to commit or release. */
  private won = false
  /** This process's last load of the key is still trying to commit: the failover is waited out for it, as a waiter would. */
  private readonly committing: boolean
  /** Lookups asked for: the first may be the batch's. */
  private lookups = 0
  /** Settles the caller's promise, once, from finish() or failed(). */
  private resolve!: (answer: Resolution | Promise<Resolution>) => void

  /** The first lookup, made by getOrLoadMany's batch; undefined: the flight sends its own. */
  private readonly first: FirstLookup | undefined

  constructor(parts: FlightParts, store: RedisStore, call: Call, notes: FlightNotes, first?: FirstLookup) {
    super(parts, store, call, notes)
    this.first = first
    this.committing = parts.core.committing.has(call.key)
    this.mode = call.force ? 'refresh' : 'read'
  }

  /** start(), as a promise. */
  run(failedRead: Promise<FreshRead> | undefined): Promise<Resolution> {
    return new Promise<Resolution>((resolve) => this.start(failedRead, resolve))
  }

  /**
   * Runs the flight and settles the caller's promise through `resolve` (a failure too, as a
   * rejected promise: a flight keeps one resolving function, not two).
   * `failedRead`: the fresh read, which failed (through a failover it is tried again first).
   */
  start(failedRead: Promise<FreshRead> | undefined, resolve: (answer: Resolution | Promise<Resolution>) => void): void {
    this.resolve = resolve
    if (!failedRead) return this.take(this.beginLookups())
    this.readFreshAgain(failedRead).then(
      (fresh) => this.proceed(() => (fresh ? this.parts.answers.hit(this.call, fresh) : this.beginLookups())),
      (error: unknown) => this.failed(error),
    )
  }

  private beginLookups(): undefined {
    this.owner = this.first?.owner ?? newOwnerId()
    return undefined
  }

  /** The step `next()` makes; a throw is the flight's failure. */
  private proceed(next: () => Step | Promise<Step>): void {
    let step: Step | Promise<Step>
    try {
      step = next()
    } catch (error) {
      return this.failed(error)
    }
    this.take(step)
  }

  private take(step: Step | Promise<Step>): void {
    if (step instanceof Promise)
      return void step.then(
        (next) => this.take(next),
        (error: unknown) => this.failed(error),
      )
    if (step === PARKED) return // woken() goes on
    if (step === undefined) return this.lookUpNext()
    this.finish(step)
  }

  /** The script once more, and its answer. */
  private lookUpNext(): void {
    let lookup: Promise<Lookup>
    try {
      lookup = this.lookUp()
    } catch (error) {
      return this.failed(error)
    }
    lookup.then(
      (found) => this.proceed(() => this.answer(found)),
      (error: unknown) => this.failed(error),
    )
  }

  /** The wait's news: the leader's message, or undefined (a poll found the lock gone, the deadline, close()). */
  woken(message: Buffer | undefined): void {
    this.proceed(() => this.afterPause(this.wait!, message))
  }

  /** The flight is settled: done with Redis first (an own load's loader runs after, its errors its own). */
  private finish(step: Resolution | (() => Promise<Resolution>)): void {
    this.doneWithRedis()
    if (typeof step !== 'function') return this.resolve(step)
    let load: Promise<Resolution>
    try {
      load = step()
    } catch (error) {
      return this.resolve(Promise.reject(error))
    }
    this.resolve(load)
  }

  /** A failure of the flight (not of a load it handed off to): see unreachable(). */
  private failed(error: unknown): void {
    let answer: Resolution | Promise<Resolution>
    try {
      answer = this.unreachable(error)
    } catch (thrown) {
      this.doneWithRedis()
      return this.resolve(Promise.reject(thrown))
    }
    this.doneWithRedis()
    this.resolve(answer)
  }

  /** Gives back the wait, and a lock a lookup may have taken unanswered. */
  private doneWithRedis(): void {
    this.wait?.release()
    if ((this.abandoned || this.first?.abandoned()) && !this.won) this.store.releaseAbandoned(this.keys, this.owner)
  }

  /** The fresh read again, through a failover as the script is (redisFailoverWait): else every process would load. */
  private readFreshAgain(failedRead: Promise<FreshRead>): Promise<Entry | undefined> {
    const { store, keys } = this
    const { key } = this.call
    let first: Promise<FreshRead> | undefined = failedRead // attempt 0, already made
    const read = () => {
      const sent = first
      first = undefined
      return sent
        ? sent.then((found) => this.core.entries.freshEntry(key, found, store))
        : this.core.entries.readFresh(key, keys, store)
    }
    const { pollInterval } = this.core.settings.lock
    return store
      .throughFailover(read, this.failoverDeadline, pollInterval, { key: keys.entry, patient: this.committing })
      .catch((error: unknown) => {
        lookedUp(this.notes)
        throw error
      })
  }

  /**
   * The script, once. A waiter's re-check (its wait subscribed) retries until its wait ends,
   * not just redisFailoverWait. The lease runs from the attempt that took the lock
   * (found.sentAt), not from the first of a failover's retries.
   */
  private lookUp(): Promise<Lookup> {
    const { store, keys, core } = this
    const { lease, pollInterval } = core.settings.lock
    const waitDeadline = this.wait?.deadline ?? 0
    this.notes.lookingUp ??= true
    let batched = this.lookups === 0 ? this.first?.answer : undefined // a retry of it goes alone, with the same owner
    this.lookups++
    return store
      .throughFailover(
        () => {
          const answer = batched
          batched = undefined
          return (
            answer ??
            store.getOrLock(keys, this.owner, lease, this.mode, core.retentionMs, -1, () => (this.abandoned = true))
          )
        },
        waitDeadline || this.failoverDeadline,
        pollInterval,
        { key: keys.entry, patient: this.committing || waitDeadline > 0 },
      )
      .finally(() => lookedUp(this.notes))
  }

  private answer(found: Lookup): Step | Promise<Step> {
    const { call, notes } = this
    const entry = this.core.entries.decode(call.key, found)
    notes.fallback = entry ?? this.core.entries.unlessDeleted(call.key, notes.fallback, found.fence)
    if (found.lock !== 'held') this.wait?.endedByLookup(found.lock)
    if (
      this.versionWhenHeld !== undefined &&
      entry &&
      found.state === 'fresh' &&
      entry.version !== this.versionWhenHeld
    )
      return this.reloadedMeanwhile(found, entry)
    switch (found.lock) {
      case 'none':
        return this.fresh(entry)
      case 'backoff':
        return this.backoff(entry, found)
      case 'pass':
        return () => this.parts.leader.loadUncached(call)
      case 'error':
        return this.parts.answers.remoteFailure(call, found.data.toString(), notes.fallback)
      case 'token':
        throw new Error(`unexpected lookup ${found.lock} in mode ${this.mode}`)
      case 'won':
        return this.lockWon(found, entry)
      case 'held':
        return this.lockHeld(found, entry)
    }
  }

  private fresh(entry: Entry | undefined): Step {
    if (entry) return this.parts.answers.hit(this.call, entry)
    this.mode = 'refresh' // corrupt data: take the lock and overwrite it
    return undefined
  }

  /**
   * A forced refresh waited on another load, whose commit landed before its re-check could
   * see the lock: that value is the refresh it asked for. A lock the re-check took is given
   * back ('r|': anyone waiting on it re-checks and finds the value).
   */
  private async reloadedMeanwhile(found: Lookup, entry: Entry): Promise<Resolution> {
    if (found.lock === 'won') {
      this.won = true
      await this.store.release(this.keys, `${this.owner}:${found.lockArg}`, 'r|').catch(() => {})
    }
    this.wait?.release()
    this.parts.answers.hit(this.call, entry)
    this.core.events.emit('coalesced', { key: this.call.key, from: 'remote' })
    return { value: entry.value, outcome: 'coalesced', shareable: true }
  }

  private backoff(entry: Entry | undefined, found: Lookup): Step {
    if (!entry) return () => this.parts.leader.loadUncached(this.call)
    entry.backoffUntil = performance.now() + Number(found.lockArg)
    this.core.remember(this.call, entry)
    return this.core.stale(this.call.key, entry, 'backoff')
  }

  /** This flight took the lock: it loads, or, with a copy in grace to serve, refreshes in the background. */
  private async lockWon(found: Lookup, entry: Entry | undefined): Promise<Step> {
    const { call, core } = this
    this.won = true
    this.parts.leader.checkReplicated(call.key, found)
    const lockValue = `${this.owner}:${found.lockArg}`
    const lock = { keys: this.keys, token: found.lockArg, lockValue, lockedAt: found.sentAt, serverAt: found.serverNow }
    const stale = call.force ? undefined : this.parts.answers.graceCopy(entry, found, this.notes) // forced: the caller wants the new value
    if (stale) return this.refreshInGrace(lock, stale)
    core.events.emit('miss', { key: call.key })
    this.handedOff = true
    this.wait?.release() // a wait that ends in taking the lock is over: the load is not one
    try {
      return await this.parts.leader.lead(call, lock, this.notes)
    } catch (error) {
      if (!this.lostInLine(error)) throw error
      // The lease ran out while the load waited for a loader permit: its loader never ran and
      // the lock was given back ('r|'). Look up again, within the call's wait, rather than fail.
      this.won = false
      this.handedOff = false
      this.wait = undefined
      return undefined
    }
  }

  /** A lead whose loader never ran because its lease ran out in line for a permit, with time left to re-check. */
  private lostInLine(error: unknown): boolean {
    return (
      endedBeforeLoading(error) &&
      !(error instanceof LoaderConcurrencyError) &&
      !this.core.closed &&
      performance.now() < this.failoverDeadline
    )
  }

  private async refreshInGrace(lock: HeldEntryLock, stale: Entry): Promise<Resolution> {
    const { call, core } = this
    core.remember(call, stale)
    if (core.refreshing >= core.settings.maxBackgroundRefreshes) {
      // Too many refreshes running here: give the lock back (waiters re-check) and serve stale.
      await this.store.release(this.keys, lock.lockValue, 'r|').catch(() => {})
      return core.stale(call.key, stale, 'grace')
    }
    core.holdRefresh(call.key, performance.now() + core.settings.lock.lease) // we are the one refreshing it
    this.parts.leader.leadInBackground({ ...call, background: true }, lock, { fallback: stale })
    return core.stale(call.key, stale, 'grace')
  }

  /** Another process holds the lock: serve a copy in grace, or wait for its load (subscribe, re-check, pause). */
  private async lockHeld(found: Lookup, entry: Entry | undefined): Promise<Step> {
    const { call, core } = this
    const pttl = Number(found.lockArg)
    if (call.force) this.versionWhenHeld ??= entry?.version ?? ''
    const stale = call.force ? undefined : this.parts.answers.graceCopy(entry, found, this.notes)
    if (stale) {
      this.wait?.ended('value')
      core.remember(call, stale)
      this.parts.refresher.watchReload(call, this.keys, stale, pttl) // another process is refreshing it
      return core.stale(call.key, stale, 'grace')
    }
    if (core.closed) return this.closedWait()
    if (!this.wait) return this.startWait()
    if (this.wait.over) {
      this.wait.ended('timeout')
      return this.giveUp(false)
    }
    return this.awaitLeader(this.wait, pttl)
  }

  /**
   * The flight failed. Redis unreachable (before a load was handed off) means every process
   * would reload on its own: while a copy may still be served (fresh or in grace), serve it,
   * and spare the database that herd for a breaker's openFor. Else load in-process only.
   */
  private unreachable(error: unknown): Resolution | Promise<Resolution> {
    const { call, core } = this
    this.wait?.ended(error instanceof RemoteLoaderError ? 'error' : 'failed')
    if (this.handedOff || !(error instanceof RedisUnavailableError)) throw error
    // An L1 entry waiting to be checked (see suspectAll) serves on, as it did before Redis failed.
    const trusted = core.memory?.trustAgain(call.key)
    const copy = trusted ?? this.notes.fallback
    const servable = copy !== undefined && performance.now() < copy.graceUntil
    if (servable) core.holdRefresh(call.key, performance.now() + core.settings.breaker.openFor)
    const served = trusted && this.parts.answers.fromMemory(call)
    if (served) return served
    if (servable) return core.stale(call.key, copy, 'grace')
    return this.parts.leader.lead(call, undefined, this.notes)
  }
}
