import { AsyncResource } from 'node:async_hooks'
import type { WaitOutcome } from '../events.js'
import { lockKeyOf, type EntryKeys } from './redis/keys.js'
import type { NewsListener, Subscription } from '../redis/notifier.js'
import {
  POLL_ONLY_MAX_MS,
  type LockNamer,
  type PollBackoff,
  type PollWait,
  type Sleeper,
} from '../redis/poll-scheduler.js'
import type { Lookup } from './redis/store.js'
import { messageKind } from './call.js'
import type { CacheCore } from './core.js'
import type { Resumable } from './wakeups.js'

/** What a wait resumes once news came: its flight, with the leader's message or undefined (re-check). */
export interface Parked {
  woken(message: Buffer | undefined): void
}

/** How a cross-process wait ended, by what the re-check found once the lock was no longer held. */
const ENDED_BY_LOOKUP: Record<Exclude<Lookup['lock'], 'held'>, WaitOutcome> = {
  none: 'value',
  error: 'error',
  backoff: 'error',
  won: 'released',
  pass: 'released',
  token: 'released',
}
/** How a cross-process wait ended, by the leader's message that answered it (commit, error, not cacheable). */
const ENDED_BY_MESSAGE: Record<string, WaitOutcome> = { c: 'value', n: 'value', e: 'error', u: 'released' }

/** Each cache's two poll backoffs (subscribed, poll only), shared by all its waits rather than one object each. */
const backoffs = new WeakMap<CacheCore, PollBackoff[]>()

function backoffOf(core: CacheCore, maxMs: number, firstMs: number): PollBackoff {
  let known = backoffs.get(core)
  if (!known) backoffs.set(core, (known = []))
  let backoff = known.find((b) => b.maxMs === maxMs && b.firstMs === firstMs)
  if (!backoff) known.push((backoff = { firstMs, maxMs }))
  return backoff
}

/**
 * One flight's wait on another process's load of its key: one of the `maxPendingWaits`, the
 * subscription to the key's channel (and one of the `maxWaits`) unless past that budget,
 * and the place in the poll scheduler, from the `wait` event to the `waited` one. An
 * unsubscribed wait has no message to wake it: the shared poll answers it, on a backoff
 * capped at POLL_ONLY_MAX_MS (250 ms), in calls of many keys within the scheduler's `maxPollRate`. `release()` gives the three back as soon as the wait is over
 * (the lock came free, the wait ran out, a message answered), not after a load that follows
 * it: else loads after waits would count as waits and cap the waits of other keys.
 *
 * A paused wait is parked: this record (with its poll entry and subscription) is all it holds.
 * No promise or async call stays suspended on it: the message handler (`news`) or the poll
 * (`wake`) hands it to the cache's wake queue, which `resume`s the flight with a plain call.
 */
export class Wait extends AsyncResource implements Sleeper, NewsListener, Resumable, LockNamer {
  private readonly core: CacheCore
  private readonly key: string
  private readonly since: number
  private subscription: Subscription | undefined
  private poll: PollWait | undefined
  private released = false
  private reported = false
  /** The flight parked on this wait, until its news is resumed. */
  private parked: Parked | undefined
  /** The news it is resumed with: the leader's message, or undefined (re-check). */
  private message: Buffer | undefined

  /**
   * Takes one of the `maxPendingWaits` and, when `subscribed`, one of the `maxWaits` (the
   * caller checked they are free), and emits `wait`.
   *
   * The wait is the AsyncResource of the caller's async context, taken here, in the flight's
   * own chain of calls: a resumed flight goes on in it (the `waited` event and its span under
   * the caller's, a loader run after the wait seeing the caller's AsyncLocalStorage), not in
   * the context of whatever read the news. A resource of its own, taken at park, was some
   * 30 B more of each parked wait.
   */
  constructor(
    core: CacheCore,
    key: string,
    private readonly subscribed: boolean,
  ) {
    super('stampede-guard.wait')
    this.core = core
    this.key = key
    core.waitsOpen++
    if (subscribed) core.waitsSubscribed++
    core.events.emit('wait', { key })
    this.since = performance.now()
  }

  /**
   * Subscribes to the key's channel when `subscribed` (through a failover, until
   * `failoverDeadline`), then enrols in the poll scheduler until `waitTimeout` from now. The
   * flight re-checks Redis after this, so a commit message cannot fall between its check and
   * the subscription.
   */
  async subscribe(keys: EntryKeys, failoverDeadline: number, waitTimeout: number): Promise<void> {
    const { store, notifier, polls, settings } = this.core
    const { pollInterval, maxPollInterval } = settings.lock
    if (this.subscribed)
      this.subscription = await store!.throughFailover(
        () => notifier!.subscribe(keys.channel),
        failoverDeadline,
        pollInterval,
        { key: keys.entry, patient: true },
      )
    const deadline = performance.now() + waitTimeout
    // Unsubscribed, the poll is all there is: a shorter cap answers it within about 250 ms of the
    // commit. The budget (maxPollRate) counts calls of up to 500 keys: 20,000 such waits cost
    // about 80,000 PTTL a second in some 160 calls.
    const maxMs = this.subscribed ? maxPollInterval : Math.min(maxPollInterval, POLL_ONLY_MAX_MS)
    this.poll = polls!.enrol(this, deadline, backoffOf(this.core, maxMs, Math.min(pollInterval, maxMs)))
  }

  /** The key's lock, named when a poll is sent (see LockNamer). */
  lockName(): string {
    return lockKeyOf(this.core.settings.namespace, this.key)
  }

  /** `performance.now()` when the wait runs out: 0 until subscribed. */
  get deadline(): number {
    return this.poll?.deadline.at ?? 0
  }

  /** The wait ran out. */
  get over(): boolean {
    return this.poll!.over
  }

  /**
   * Parks `flight` until the leader's message, a poll finding the lock gone (or failing), the
   * deadline or close() (undefined then): `flight.woken()` is called with it, from the wake queue.
   */
  park(flight: Parked, lockPttl: number): void {
    this.parked = flight
    if (!this.poll!.sleep(this, lockPttl)) return this.news(undefined) // over already
    this.subscription?.listen(this) // a message queued meanwhile answers at once
  }

  /** The poll found the lock gone (or failed), the deadline came, or close(): re-check. */
  wake(): void {
    this.subscription?.unlisten()
    this.woke(undefined)
  }

  /** A message on the key's channel (or the subscription's end: undefined). */
  news(message: Buffer | undefined): void {
    this.poll?.stopSleeping()
    this.woke(message)
  }

  private woke(message: Buffer | undefined): void {
    if (!this.parked) return
    this.message = message
    this.core.wakeups.add(this)
  }

  /** The wake queue's turn: the parked flight goes on. */
  resume(): void {
    const flight = this.parked
    const message = this.message
    this.parked = this.message = undefined
    if (flight) this.runInAsyncScope(flight.woken, flight, message)
  }

  /** Gives back the poll slot, the subscription and the budgets' slots; idempotent. */
  release(): void {
    this.poll?.end() // kept: its deadline still bounds the re-checks after the wait (see lookUp)
    this.subscription?.release()
    this.subscription = undefined
    if (!this.released) {
      this.core.waitsOpen--
      if (this.subscribed) this.core.waitsSubscribed--
    }
    this.released = true
  }

  /** Emits `waited` with how the wait ended, once (later calls are no-ops). */
  ended(outcome: WaitOutcome): void {
    if (this.reported) return
    this.reported = true
    this.core.events.emit('waited', { key: this.key, durationMs: performance.now() - this.since, outcome })
  }

  /** ended(), by what a re-check found once the lock was no longer held. */
  endedByLookup(lock: Exclude<Lookup['lock'], 'held'>): void {
    this.ended(ENDED_BY_LOOKUP[lock])
  }

  /** ended(), by the leader's message that answered the wait. */
  endedByMessage(message: Buffer): void {
    this.ended(ENDED_BY_MESSAGE[messageKind(message)] ?? 'released')
  }
}
