import { fallbackValid } from '../entry.js'
import { CacheClosedError } from '../errors.js'
import { entryKeys, type EntryKeys } from './redis/keys.js'
import type { RedisStore } from './redis/store.js'
import type { Answers } from './answers.js'
import { type Call, type FlightNotes, type Resolution, messageKind } from './call.js'
import type { CacheCore } from './core.js'
import type { LoadLeader } from './lead.js'
import type { Refresher } from './refresh.js'
import { type Parked, Wait } from './wait.js'

/** What a flight needs of the cache's parts (the `Resolver` hands itself). */
export interface FlightParts {
  readonly core: CacheCore
  readonly leader: LoadLeader
  readonly refresher: Refresher
  readonly answers: Answers
}

/** The flight is parked on its wait: its `woken()` goes on, called from the cache's wake queue. */
export const PARKED = Symbol('parked')

/**
 * What one answer of the script leads to: the caller's answer; undefined to look up again;
 * PARKED (wait for news); or a load of the caller's own, run once the flight is done with
 * Redis (its wait given back, an abandoned lock released), whose errors are the loader's and
 * nothing else's.
 */
export type Step = Resolution | undefined | typeof PARKED | (() => Promise<Resolution>)

/**
 * The flight's wait on another process's load of its key: started (subscribe, then re-check),
 * parked until news, resumed, or given up (ran out, not allowed past `maxPendingWaits`, or
 * close()). The state a flight and its wait share is here too; `RedisFlight` is the rest of
 * the flight (the lookup loop and the script's answers). One object, not two: a parked wait
 * holds this one and its `Wait`.
 *
 * Its members are the flight's alone: protected, and tagged internal so that the package's
 * declarations do not show them (as they showed none of RedisFlight's private ones).
 */
export abstract class WaitingFlight implements Parked {
  /** @internal The key's Redis names, built when first needed; a parked flight drops them (see awaitLeader). */
  protected names: EntryKeys | undefined
  /** @internal Set after the fresh read: a hit needs none. */
  protected owner = ''
  /** @internal Past this point a RedisUnavailableError is the loader's own. */
  protected handedOff = false
  /** @internal */
  protected readonly failoverDeadline: number
  /** @internal */
  protected wait: Wait | undefined

  constructor(
    /** @internal */
    protected readonly parts: FlightParts,
    /** @internal */
    protected readonly store: RedisStore,
    /** @internal */
    protected readonly call: Call,
    /** @internal */
    protected readonly notes: FlightNotes,
  ) {
    this.failoverDeadline = performance.now() + call.policy.waitTimeout
  }

  /** @internal The cache's core: the parts' (not a field of each flight). */
  protected get core(): CacheCore {
    return this.parts.core
  }

  /** @internal */
  protected get keys(): EntryKeys {
    return (this.names ??= entryKeys(this.core.settings.namespace, this.call.key))
  }

  /** The wait's news: the leader's message, or undefined (a poll found the lock gone, the deadline, close()). */
  abstract woken(message: Buffer | undefined): void

  /** @internal Subscribes first, then re-checks (undefined), so the leader's commit message cannot fall between the two. */
  protected async startWait(): Promise<Step> {
    const { core, call } = this
    if (core.waitsOpen >= core.settings.maxPendingWaits) {
      core.events.emit('wait-capped', { key: call.key, waits: core.waitsOpen, polled: false })
      return this.giveUp(true)
    }
    // Past maxWaits the wait still waits, on the shared budgeted poll alone (no subscription).
    const subscribed = core.subscribedWaitFree()
    if (!subscribed) core.events.emit('wait-capped', { key: call.key, waits: core.waitsSubscribed, polled: true })
    this.wait = new Wait(core, call.key, subscribed)
    await this.wait.subscribe(this.keys, this.failoverDeadline, call.policy.waitTimeout)
    return undefined
  }

  /** @internal Parks until the leader's message, a poll finding the lock gone (or failing), or the deadline: then afterPause(). */
  protected awaitLeader(wait: Wait, pttl: number): Step {
    wait.park(this, pttl)
    // Its four names and their flattened copies were some 300 B of each of 20,000 parked
    // waits: rebuilt (two concatenations) when it resumes, which most waits do once.
    this.names = undefined
    return PARKED
  }

  /** @internal The pause's news: the leader's message answers; without one (undefined), re-check. */
  protected afterPause(wait: Wait, message: Buffer | undefined): Step | Promise<Step> {
    if (message === undefined) return this.core.closed ? this.closedWait() : undefined // close() woke it (see PollScheduler.interruptAll)
    if (messageKind(message) === 'u') wait.release() // loads uncached: no longer a wait
    return this.parts.answers.onLeaderMessage(this.call, this.keys, message, this.notes.fallback).then((answer) => {
      if (answer) wait.endedByMessage(message)
      return answer // undefined: no news, or the lock was released without a value
    })
  }

  /** @internal Not waiting (the wait ran out, or was not allowed past maxPendingWaits: `capped`): stale, else onWaitTimeout or (capped) LockWaitTimeoutError. */
  protected async giveUp(capped: boolean): Promise<Resolution> {
    const { call, core, notes, keys } = this
    this.wait?.release()
    const timedOut = this.parts.answers.waitTimedOut(call, notes.fallback, capped)
    if (timedOut) return timedOut
    // Load without the lock; a fresh token still fences the result against newer ones.
    const { lease } = core.settings.lock
    const found = await this.store.getOrLock(keys, this.owner, lease, 'token', core.retentionMs)
    notes.fallback = core.entries.unlessDeleted(call.key, notes.fallback, found.fence)
    this.handedOff = true
    const lock = { keys, token: found.lockArg, lockValue: '', lockedAt: 0, serverAt: found.serverNow }
    return await this.parts.leader.lead(call, lock, notes)
  }

  /**
   * @internal
   * close() was called: the wait ends now rather than at waitTimeout (a closing process must
   * not hang on another's load). A stale copy still serves; else CacheClosedError, not
   * onWaitTimeout: 'load' would start new work close() then waits for, 'throw' would misname it.
   */
  protected closedWait(): Resolution {
    this.wait?.release()
    if (!fallbackValid(this.notes.fallback, performance.now())) throw new CacheClosedError()
    this.wait?.ended('timeout')
    return this.core.stale(this.call.key, this.notes.fallback, 'wait-timeout')
  }
}
