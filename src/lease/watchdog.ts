import { Deadlines } from '../deadlines.js'
import { LockLostError } from '../errors.js'

/**
 * Every watchdog's renewals, deadlines and maxHold of the process on one timer, instead of
 * three timers per held lock.
 */
const timeline = new Deadlines()

/** Renewals come due on a grid of this many ms at most, so locks taken about together renew together. */
const MAX_RENEWAL_GRID_MS = 250

/**
 * When a renewal due at `at` is sent: at the start of its grid cell (lease/12, at most
 * `MAX_RENEWAL_GRID_MS`), so the renewals of locks with the same lease that fall in one cell
 * fire in one pass of the timeline and go out as one batched call (src/redis/renewals.ts).
 * Never later than asked: a renewal at lease/3 is sent at most lease/12 early; nor sooner
 * than 10 ms from now unless asked, so a retry after a failure does not spin.
 */
function alignedRenewal(at: number, leaseMs: number): number {
  const grid = Math.max(1, Math.min(MAX_RENEWAL_GRID_MS, leaseMs / 12))
  return Math.max(Math.floor(at / grid) * grid, Math.min(at, performance.now() + 10))
}

/**
 * How much earlier than the store a holder gives its lease up, to cover clock-rate drift
 * between this process and the store: 1 % of the lease + 2 ms (node-redlock's formula,
 * also the Redlock validity drift).
 */
export function leaseMarginMs(leaseMs: number): number {
  return Math.floor(leaseMs * 0.01) + 2
}

export interface WatchdogOptions {
  /** The user's key, for the `LockLostError`. */
  readonly key: string
  /** Lease length in ms; `renew(leaseMs)` makes it run this long again. */
  readonly leaseMs: number
  /**
   * `performance.now()` when the command that took the lock was *sent*: the store started
   * the lease at or after this instant, so a deadline counted from it is never late.
   */
  readonly startedAt: number
  /** Extends the lease: `true` extended, `false` no longer ours; rejects when the store is unreachable. */
  renew(leaseMs: number): Promise<boolean>
  /** Gives the lock up this long after `startedAt`, renewed or not (the cache's `lock.maxHold`). */
  readonly maxHoldMs?: number
  /** Called once, synchronously, before `signal` aborts. */
  onLost?(error: LockLostError): void
}

/**
 * The watchdog of a held lease, shared by the lock API and the cache's leader lease
 * (Redisson's idea, with two corrections from other libraries' bugs):
 *
 * - renewal every lease/3 counted from when the lock was *taken*, not from the first
 *   attempt (node-redlock #169), then from when each confirmed renewal was sent;
 * - a local deadline at `last confirmed renewal sent + lease − margin`: when it passes,
 *   `signal` aborts with `LockLostError` whatever a renewal in flight is doing. A renewal
 *   stuck on a black-holed connection cannot stretch the holder past its lease, which is
 *   what gave two holders for up to `redisTimeout` before;
 * - a lost lease stays lost: a renewal confirmed after the deadline does not take the
 *   abort back, and renewals only extend a lock that is still ours, never take it again
 *   (redis-semaphore #175). After a deadline loss they go on (the lock may be ours still,
 *   and a holder that ignores its signal is better not joined); after a takeover or
 *   `maxHold`, they stop.
 *
 * Renewals are sent on a grid (see `alignedRenewal`), so a process holding many locks
 * renews them in few batched calls; the timers of every watchdog share one (unref'd).
 * Never throws.
 */
export class LeaseWatchdog {
  /** Made on the first read of `signal` (a load that never looks at it costs none). */
  private controller: AbortController | undefined
  private leaseMs: number
  /** Send time of the newest renewal the store confirmed (initially: of the acquisition). */
  private confirmedSentAt: number
  /**
   * The earliest deadline of the renewals unanswered since that confirmation: one that got
   * no reply may still have run, and a shorter lease (`extend(shorter)`) may be in force in
   * the store. `Infinity` when there is none.
   */
  private unansweredUntil = Infinity
  private renewTimer: (() => void) | undefined
  private deadlineTimer: (() => void) | undefined
  private holdTimer: (() => void) | undefined
  private queue: Promise<unknown> = Promise.resolve()
  private stopped = false
  /** False once renewing is pointless: taken over, held past maxHold, or stopped. */
  private renewing = true
  private lostWith: LockLostError | undefined

  constructor(private readonly options: WatchdogOptions) {
    this.leaseMs = options.leaseMs
    this.confirmedSentAt = options.startedAt
    this.armDeadline()
    this.scheduleRenewal(options.startedAt + this.leaseMs / 3)
    if (options.maxHoldMs !== undefined) {
      this.holdTimer = timer(options.startedAt + options.maxHoldMs, () => this.lose('held longer than lock.maxHold'))
    }
  }

  /** Aborts with `LockLostError` when the lease is lost; never by `stop()`. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController()
      if (this.lostWith) this.controller.abort(this.lostWith)
    }
    return this.controller.signal
  }

  /** The `performance.now()` instant the lease is given up at, unless a renewal is confirmed first. */
  get deadline(): number {
    return Math.min(this.confirmedSentAt + this.leaseMs - leaseMarginMs(this.leaseMs), this.unansweredUntil)
  }

  /** The error the lease was lost with, if it was. */
  get lost(): LockLostError | undefined {
    return this.lostWith
  }

  /**
   * ms left before the local deadline (`last confirmed renewal sent + lease − margin`), by
   * the monotonic clock, read now: 0 once it has passed, even if the deadline's timer has
   * not run yet (a process resumed after a pause runs its timers in expiry order, so an
   * earlier timer of its own runs first). 0 once lost or stopped.
   */
  get validForMs(): number {
    if (this.lostWith || this.stopped) return 0
    return Math.max(0, this.deadline - performance.now())
  }

  /**
   * Gives the lease up now if its deadline has passed by the monotonic clock but its timer
   * has not run yet (as the timer would: renewals go on). `assertHeld()` calls it, so a
   * holder resumed after a pause learns of the loss at its first check, not at the timer.
   */
  expireIfDue(): void {
    if (!this.lostWith && !this.stopped && performance.now() >= this.deadline)
      this.lose('the lease ran out before a renewal was confirmed', true)
  }

  /** Throws the `LockLostError` of a lease lost, or past its deadline by the clock read now (see expireIfDue). */
  assertHeld(): void {
    this.expireIfDue()
    if (this.lostWith) throw this.lostWith
  }

  /**
   * Renews now, after any renewal in flight (a user's `extend`). Resolves `true` when
   * extended, `false` when the lease is lost (or was already); rejects with the store's
   * error when it could not be reached (the deadline still stands).
   */
  extend(leaseMs = this.leaseMs): Promise<boolean> {
    const run = this.queue.then(() => this.renewOnce(leaseMs))
    this.queue = run.catch(() => {})
    return run
  }

  private async renewOnce(leaseMs: number): Promise<boolean> {
    if (!this.renewing || this.stopped) return false
    this.renewTimer?.()
    const sentAt = performance.now()
    let renewed: boolean
    try {
      renewed = await this.options.renew(leaseMs)
    } catch (error) {
      // No answer, but it may have run: a shorter lease than the one confirmed would then
      // end the lock sooner, so the deadline comes no later than that lease's.
      const until = sentAt + leaseMs - leaseMarginMs(leaseMs)
      if (until < this.deadline) {
        this.unansweredUntil = until
        if (!this.lostWith && !this.stopped) this.armDeadline()
      }
      // Unreachable: the lock lives on until its lease runs out, so keep trying; the
      // deadline timer gives it up in time if no renewal gets through.
      if (this.renewing && !this.stopped)
        this.scheduleRenewal(Math.max(performance.now() + 10, sentAt + this.leaseMs / 6))
      throw error
    }
    if (!renewed) {
      this.renewing = false
      this.lose('the lock expired or was taken by another owner')
      return false
    }
    if (this.stopped) return !this.lostWith
    this.leaseMs = leaseMs
    this.scheduleRenewal(sentAt + leaseMs / 3)
    if (this.lostWith) return false // confirmed after the deadline: the holder was told, and lost is final
    this.confirmedSentAt = Math.max(this.confirmedSentAt, sentAt)
    this.unansweredUntil = Infinity // sent after any unanswered one, so it ran after it
    this.armDeadline()
    return true
  }

  private armDeadline(): void {
    this.deadlineTimer?.()
    // Renewals go on after this loss: compare-and-PEXPIRE only keeps a lock that is still
    // ours, so a holder that carries on regardless (a loader ignoring its signal) is not
    // joined by a second one while it does, and a late confirmation wastes nothing.
    this.deadlineTimer = timer(this.deadline, () => this.lose('the lease ran out before a renewal was confirmed', true))
  }

  private scheduleRenewal(at: number): void {
    this.renewTimer?.()
    this.renewTimer = timer(alignedRenewal(at, this.leaseMs), () => {
      this.extend().catch(() => {})
    })
  }

  /**
   * Marks the lease lost (also for a loss the caller learnt elsewhere): aborts `signal`
   * once. `keepRenewing`: the lock may still be ours (only its confirmation is late), so
   * keep extending it until `stop()`. Idempotent; no-op after `stop()`.
   */
  lose(reason: string, keepRenewing = false): void {
    if (this.stopped) return
    if (!keepRenewing) {
      this.renewing = false
      this.clearTimers()
    }
    if (this.lostWith) return
    this.lostWith = new LockLostError(this.options.key, reason)
    this.deadlineTimer?.()
    this.holdTimer?.()
    this.options.onLost?.(this.lostWith)
    this.controller?.abort(this.lostWith)
  }

  /** Stops renewing and waits for a renewal in flight, so it cannot race the release. */
  async stop(): Promise<void> {
    this.stopped = true
    this.renewing = false
    this.clearTimers()
    await this.queue
  }

  private clearTimers(): void {
    this.renewTimer?.()
    this.deadlineTimer?.()
    this.holdTimer?.()
  }
}

/** Calls `fire` at `performance.now()` instant `at` (soon if it has passed) on the shared timeline; returns its cancel. */
function timer(at: number, fire: () => void): () => void {
  return timeline.add(at, fire)
}
