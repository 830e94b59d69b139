import { Deadlines, type DeadlineEntry, type Timed } from '../deadlines.js'
import { keySlot } from './failing-clock.js'
import { nextBackoff } from '../timers.js'
import { repliesFor } from './batches.js'

/**
 * Default budget of safety-net polls, in poll COMMANDS (`poll-locks.lua` calls) per second
 * per scheduler (per cache, per Redis lock backend). Each call asks about up to
 * `POLL_KEYS_PER_CALL` locks, so the budget is no bound on keys: each wait's own backoff is
 * (its poll interval). 20,000 waits polled every 250 ms take 160 calls/s of it.
 */
export const DEFAULT_MAX_POLL_RATE = 1_000
/**
 * The longest backoff of a wait that is not subscribed (past a budget of subscriptions): no
 * message will wake it, so its poll is how it learns of a release, within about this long
 * (the scheduler's rate budget still bounds what all such waits cost Redis).
 */
export const POLL_ONLY_MAX_MS = 250
/**
 * Most keys one poll-locks.lua call asks about: one PTTL each. Measured by INFO commandstats
 * (docs/limits.md): 268 µs of Redis time per call of 500 (67 µs for 100, 639 µs for 1,000),
 * so one call stays well under a millisecond and does not hold up other clients.
 */
export const POLL_KEYS_PER_CALL = 500
/** Most poll calls not yet answered: a slow Redis is not sent more. */
const MAX_CALLS_IN_FLIGHT = 8
/** Due polls are gathered this long at most, so polls due close together share one call. */
const GATHER_MS = 20
/** The budget may be saved up for this long (a burst of first polls), no more. */
const BURST_SECONDS = 0.1

/** What a waiter can also be woken by: a subscription (its message is what `pause` returns). */
export interface Interruptible<T> {
  /** The next message, or `undefined` once `interrupt()` is called; `Infinity`: no timer. */
  next(timeoutMs: number): Promise<T | undefined>
  interrupt(): void
}

/** A waiter's poll interval: starts at `firstMs`, doubles (jittered down by up to 25 %) up to `maxMs`, never past it. */
export interface PollBackoff {
  readonly firstMs: number
  readonly maxMs: number
}

/**
 * What names a wait's lock, asked each time a poll is sent: a cache's wait builds the name from
 * its key then, rather than hold it all the while it waits (about 80 B of each parked wait).
 */
export interface LockNamer {
  lockName(): string
}

/** A wait taken into a poll call, with the round of its sleep it answers for. */
interface Polled {
  readonly wait: PollWait
  readonly round: number
}

/**
 * The safety-net poll of every wait of one cache (or one Redis lock backend), on one
 * timeline and one rate budget, instead of a timer and a script call per waiting key.
 * Pub/sub wakes a waiter first; this catches what it cannot: a holder that died without
 * a word (its lease ends), a message lost with the subscriber connection.
 *
 * Each wait keeps its own backoff and deadline. Polls that come due are gathered for up to
 * `GATHER_MS` and asked about together (poll-locks.lua: the PTTL of up to
 * `POLL_KEYS_PER_CALL` locks; per slot on a Cluster), at most `maxPerSecond` calls a second:
 * past that, polls wait their turn, oldest first, and each key is polled less often. Each
 * wait's own backoff bounds how often its key is polled, so 20,000 waits polled every 250 ms
 * cost 160 calls a second. A waiter is woken only when its lock is
 * gone (then it re-checks with its own lookup) or the poll failed (its lookup then meets
 * the failure); while the lock is held it sleeps on, at most until that lock's lease ends.
 */
export class PollScheduler {
  /** Every wait's next poll and deadline, on one timer. */
  readonly timeline = new Deadlines()
  private readonly due = new Set<PollWait>()
  private readonly capacity: number
  private tokens: number
  private refilledAt = performance.now()
  private pumpTimer: NodeJS.Timeout | undefined
  private callsInFlight = 0
  /** Keys polled and calls sent since start (tests and benchmarks). */
  readonly counts = { keys: 0, calls: 0 }

  /**
   * `check(locks)`: one poll-locks.lua call for one batch, resolving its reply.
   * `keyOf` on a Cluster: a lock's full key (for its slot).
   */
  constructor(
    private readonly check: (locks: string[]) => Promise<unknown>,
    readonly maxPerSecond = DEFAULT_MAX_POLL_RATE,
    private readonly keyOf?: (lock: string) => string,
  ) {
    this.capacity = Math.max(1, maxPerSecond * BURST_SECONDS)
    this.tokens = this.capacity
  }

  private readonly enrolled = new Set<PollWait>()

  /** Waits enrolled now. */
  get waits(): number {
    return this.enrolled.size
  }

  /** @internal */
  track(wait: PollWait, enrolled: boolean): void {
    if (enrolled) this.enrolled.add(wait)
    else this.enrolled.delete(wait)
  }

  /**
   * Every wait polls now rather than at its planned time, within the rate budget (oldest
   * first): messages may have been missed (the subscriber connection dropped, or came back
   * and resubscribed), and a subscribed wait's next planned poll may be seconds away.
   * Called synchronously from the subscriber's `ready` event, before ioredis writes its
   * resubscriptions; the polls go out on the next gather (≥ one timer tick later), behind them.
   */
  pollAllNow(): void {
    for (const wait of this.enrolled) wait.pollNow()
  }

  /** Wakes every paused wait now, without a poll (the cache is closing: its waits end). */
  interruptAll(): void {
    for (const wait of this.enrolled) wait.interrupt()
  }

  /**
   * One waiter's wait on `lock` (its name, or what names it when polled), until `deadline` (a
   * `performance.now()` time). End it with `end()`.
   */
  enrol(lock: string | LockNamer, deadline: number, backoff: PollBackoff): PollWait {
    return new PollWait(this, lock, deadline, backoff)
  }

  /** @internal A wait's poll came due. */
  queue(wait: PollWait): void {
    this.due.add(wait)
    this.pumpSoon()
  }

  /** @internal A wait woke before its poll was sent. */
  unqueue(wait: PollWait): void {
    this.due.delete(wait)
  }

  private pumpSoon(): void {
    if (this.pumpTimer || this.due.size === 0 || this.callsInFlight >= MAX_CALLS_IN_FLIGHT) return
    this.refill()
    const ms =
      this.tokens >= 1 ? GATHER_MS : Math.max(GATHER_MS, Math.ceil(((1 - this.tokens) * 1000) / this.maxPerSecond))
    this.pumpTimer = setTimeout(() => this.pump(), ms)
    this.pumpTimer.unref()
  }

  private refill(): void {
    const now = performance.now()
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.refilledAt) * this.maxPerSecond) / 1000)
    this.refilledAt = now
  }

  private pump(): void {
    this.pumpTimer = undefined
    this.refill()
    const calls = Math.min(Math.floor(this.tokens), MAX_CALLS_IN_FLIGHT - this.callsInFlight)
    if (calls > 0 && this.due.size > 0) {
      const batches = this.take(calls)
      this.tokens -= batches.length
      for (const batch of batches) this.send(batch)
    }
    this.pumpSoon()
  }

  /**
   * The oldest due polls that fit in `calls` calls of at most POLL_KEYS_PER_CALL keys (of one
   * slot each on a Cluster, where that is about one call per key: every entry has its own tag).
   */
  private take(calls: number): Polled[][] {
    const full: Polled[][] = []
    const open = new Map<number, Polled[]>()
    const keyOf = this.keyOf
    for (const wait of this.due) {
      const slot = keyOf ? keySlot(keyOf(wait.lock)) : 0
      let batch = open.get(slot)
      if (!batch) {
        if (full.length + open.size >= calls) break // the rest wait their turn, oldest first
        batch = []
        open.set(slot, batch)
      }
      this.due.delete(wait)
      batch.push({ wait, round: wait.round })
      if (batch.length >= POLL_KEYS_PER_CALL) {
        full.push(batch)
        open.delete(slot)
      }
    }
    return [...full, ...open.values()]
  }

  private send(batch: Polled[]): void {
    this.callsInFlight++
    this.counts.keys += batch.length
    this.counts.calls++
    repliesFor(batch.length, 'poll-locks', () => this.check(batch.map((polled) => polled.wait.lock)))
      .then((ttls) => batch.forEach(({ wait, round }, i) => wait.polled(round, Number(ttls[i]))))
      .catch(() => batch.forEach(({ wait, round }) => wait.polled(round, undefined)))
      .finally(() => {
        this.callsInFlight--
        this.pumpSoon()
      })
  }
}

/**
 * What a sleeping wait is woken through (the cache's parked wait is one): an object with a
 * method, so a sleep costs no promise and no closure.
 */
export interface Sleeper {
  wake(): void
}

/**
 * One waiter's wait: its deadline and backoff on the scheduler's timeline. `sleep()` parks a
 * `Sleeper` until a poll finds the lock gone (or fails), the deadline, or `interrupt()`;
 * `pause()` is the same as a promise, also ended by a message on a subscription.
 */
export class PollWait implements Timed {
  /** Which sleep a poll answers for: bumped by each sleep's end and each poll that finds the lock held. */
  round = 0
  /**
   * Whole milliseconds, always: a field that only ever holds small integers is stored in the
   * object itself, where one fractional value makes V8 box it (16 B more for each wait).
   */
  private pollMs: number
  /** The next poll on the timeline, while sleeping (an entry, not a closure: see Deadlines.schedule). */
  private nextPoll: DeadlineEntry | undefined
  /**
   * @internal The deadline (a `performance.now()` time): this wait is its own entry on the
   * timeline (Deadlines.scheduleEntry), rather than hold a separate one (40 B of each wait).
   */
  readonly at: number
  /** @internal The timeline's side of the entry: this wait until the deadline fires or the wait ends. */
  fire: Timed | undefined
  private sleeper: Sleeper | undefined
  private expired = false
  private ended = false
  /** Messages may have been missed while this wait was not sleeping: its next sleep polls at once. */
  private pollSoon = false

  constructor(
    private readonly scheduler: PollScheduler,
    private readonly lockNamer: string | LockNamer,
    deadline: number,
    private readonly backoff: PollBackoff,
  ) {
    this.pollMs = Math.max(1, Math.floor(backoff.firstMs))
    this.at = deadline
    this.fire = this
    scheduler.track(this, true)
    scheduler.timeline.scheduleEntry(this)
  }

  /** The deadline's entry: `deadline.at` is when the wait runs out. */
  get deadline(): DeadlineEntry {
    return this
  }

  /** The name of the lock waited on. */
  get lock(): string {
    const namer = this.lockNamer
    return typeof namer === 'string' ? namer : namer.lockName()
  }

  /** The timeline's call: the deadline came, or the next poll is due. */
  due(entry: DeadlineEntry): void {
    if (entry === this) {
      this.expired = true
      return this.interrupt()
    }
    if (entry !== this.nextPoll) return
    this.nextPoll = undefined
    this.scheduler.queue(this)
  }

  private cancelPoll(): void {
    if (this.nextPoll) this.scheduler.timeline.cancel(this.nextPoll)
    this.nextPoll = undefined
  }

  /** The deadline has come, or the wait ended: `pause()` returns at once, `sleep()` refuses. */
  get over(): boolean {
    return this.expired || this.ended
  }

  /**
   * Parks `sleeper` until a poll finds the lock gone or fails, the deadline, or `interrupt()`:
   * then `sleeper.wake()`, once, with the sleep already ended. `busyForMs`: how long the
   * holder's lease still ran when last seen (`Infinity`: unknown); the first poll comes no
   * later than when it ends. False (and no sleep) when the wait is over.
   */
  sleep(sleeper: Sleeper, busyForMs: number): boolean {
    if (this.expired || this.ended) return false
    this.plan(busyForMs)
    this.sleeper = sleeper
    return true
  }

  /** Ends a sleep without waking its sleeper (it was woken otherwise: a message); its poll is dropped. */
  stopSleeping(): void {
    this.sleeper = undefined
    this.round++
    this.cancelPoll()
    this.scheduler.unqueue(this)
  }

  /**
   * `sleep()` as a promise, also ended by news on `wakeup` (its message is returned); `undefined`
   * after a poll, the deadline or `interrupt()`.
   */
  async pause<T>(wakeup: Interruptible<T> | undefined, busyForMs: number): Promise<T | undefined> {
    if (!wakeup) {
      await new Promise<void>((resolve) => this.sleep({ wake: resolve }, busyForMs) || resolve())
      return undefined
    }
    if (!this.sleep({ wake: () => wakeup.interrupt() }, busyForMs)) return undefined
    try {
      return await wakeup.next(Infinity)
    } finally {
      if (this.sleeper) this.stopSleeping()
    }
  }

  /** Wakes a sleep in progress (the caller aborted, the deadline came, the cache is closing). */
  interrupt(): void {
    const sleeper = this.sleeper
    if (!sleeper) return
    this.stopSleeping()
    sleeper.wake()
  }

  /** Ends the wait: drops its poll and deadline, wakes a sleep in progress. Idempotent. */
  end(): void {
    if (this.ended) return
    this.ended = true
    this.scheduler.track(this, false)
    this.scheduler.timeline.cancel(this)
    this.interrupt()
  }

  /** @internal Polls at once (see `PollScheduler.pollAllNow`); not sleeping now: its next sleep does. */
  pollNow(): void {
    if (this.ended) return
    if (!this.sleeper) {
      this.pollSoon = true
      return
    }
    this.round++ // an answer already on its way may predate the news: only this poll's answer counts
    this.cancelPoll()
    this.scheduler.queue(this)
  }

  /** @internal The scheduler's answer: the lock's PTTL, or `undefined` when the poll failed. */
  polled(round: number, pttl: number | undefined): void {
    if (round !== this.round || !this.sleeper) return // woken meanwhile: this answer is for an old sleep
    // Gone, or without an expiry (planted: the waiter's lookup repairs it), or the poll failed.
    if (pttl === undefined || !(pttl > 0)) return this.interrupt()
    this.round++
    this.plan(pttl) // still held: sleep on
  }

  /** The next poll: after the backoff, and no later than when the holder's lease ends. */
  private plan(busyForMs: number): void {
    const ms = this.pollSoon ? 1 : Math.max(1, Math.min(this.pollMs, busyForMs + 1))
    this.pollSoon = false
    // Jittered below the cap only: ±25 % around maxMs stretched a "5 s at most" sleep to 6.25 s.
    this.pollMs = Math.max(1, Math.floor(nextBackoff(this.pollMs, this.backoff.maxMs)))
    this.nextPoll = this.scheduler.timeline.schedule(performance.now() + ms, this)
  }
}
