import type { PollBackoff, PollWait } from '../redis/poll-scheduler.js'
import { delay, nextBackoff } from '../timers.js'

/** Something that can wake a waiter early: the notifier's subscription, a watch, … */
export interface Wakeup {
  /** Resolves on news (a release), or after `timeoutMs` without any (`Infinity`: only on news or `interrupt()`). */
  next(timeoutMs: number): Promise<unknown>
  /** Wakes a pending `next()` at once, keeping the subscription (needed to wait with a poll scheduler). */
  interrupt?(): void
  /** Ends it, waking a pending `next()` at once. Safe to call twice. */
  release(): void
}

/** A backend's poll scheduler for one lock: a wait enrolled until `deadline`, with the backoff given. */
export type PollEnrolment = (deadline: number, backoff: PollBackoff) => PollWait

/** Safety-net poll without a subscription: starts here and doubles (jittered down by up to 25 %) up to `MAX_POLL_MS`. */
export const FIRST_POLL_MS = 50
export const MAX_POLL_MS = 1_000
const UNSUBSCRIBED: PollBackoff = { firstMs: FIRST_POLL_MS, maxMs: MAX_POLL_MS }
/**
 * With a live subscription a waiter sleeps until the holder's lease would end (a crashed
 * holder publishes nothing), but at most this long: a release message is lost only when
 * the subscriber connection is, and this bounds what that costs. No polling while held.
 */
export const SUBSCRIBED_MAX_SLEEP_MS = 5_000
const SUBSCRIBED: PollBackoff = { firstMs: SUBSCRIBED_MAX_SLEEP_MS, maxMs: SUBSCRIBED_MAX_SLEEP_MS }

/**
 * One acquisition's wait, shared by the backends: a deadline, the caller's signal, and a
 * bounded safety net under whatever notification the backend has. A waiter is woken by a
 * release message at once; the holder's remaining lease bounds each sleep, so a crashed
 * holder costs at most its lease; without a subscription, a backed-off poll.
 */
export class WaitBudget {
  /** `performance.now()` when the wait is spent. */
  readonly deadline: number
  private pollMs = FIRST_POLL_MS

  constructor(
    waitMs: number,
    private readonly signal: AbortSignal,
  ) {
    this.deadline = performance.now() + waitMs
  }

  /** ms left before the deadline (≤ 0 when spent). */
  get leftMs(): number {
    return this.deadline - performance.now()
  }

  /** The wait is over: deadline passed or the caller aborted. */
  get over(): boolean {
    return this.signal.aborted || this.leftMs <= 0
  }

  /**
   * Sleeps until `wakeup` has news, `busyForMs` (the holder's remaining lease) has passed,
   * the deadline comes, or the caller aborts, whichever is first; without `wakeup`, also
   * until the next poll.
   */
  async pause(wakeup: Wakeup | undefined, busyForMs = Infinity): Promise<void> {
    const ms = Math.max(1, Math.min(wakeup ? SUBSCRIBED_MAX_SLEEP_MS : this.pollMs, busyForMs + 1, this.leftMs))
    if (!wakeup) this.pollMs = nextBackoff(this.pollMs, MAX_POLL_MS)
    if (this.signal.aborted) return
    // Only one pending next() at a time: a second would take the first's message.
    const sleep = wakeup ? undefined : delay(ms)
    const onAbort = () => (wakeup ? wakeup.release() : sleep!.cancel())
    this.signal.addEventListener('abort', onAbort, { once: true })
    try {
      await (wakeup ? wakeup.next(ms) : sleep!.promise)
    } finally {
      this.signal.removeEventListener('abort', onAbort)
    }
  }
}

/** One attempt's outcome: the lock, or how long the holder's lease still runs (`Infinity` if unknown). */
export type Attempt<Held> = { held: Held } | { busyForMs: number }

/**
 * The waiting loop every notifying backend shares: try; if busy, subscribe and try again
 * *before* sleeping (so a release cannot fall between the check and the subscription,
 * Redisson #1763); then sleep until a release message, the holder's lease, the next poll or
 * the deadline, and try again. A failed subscription leaves the poll to bound the wait.
 * Resolves `undefined` when the wait is spent or the caller aborted. `subscribe` may give
 * `undefined` (a subscription budget spent): the wait then polls only, as when it fails.
 *
 * With `poll` (a backend's poll scheduler), the safety net is its shared, budgeted poll of
 * the lock's remaining lease rather than an attempt per wait on a timer of its own: the
 * waiter attempts again only on a message, when a poll finds the lock gone, or at the deadline.
 */
export async function acquireWaiting<Held>(
  request: { readonly waitMs: number; readonly signal: AbortSignal },
  attempt: () => Promise<Attempt<Held>>,
  subscribe: () => Promise<Wakeup | undefined>,
  poll?: PollEnrolment,
): Promise<Held | undefined> {
  const budget = new WaitBudget(request.waitMs, request.signal)
  let wakeup: Wakeup | undefined
  let subscribed = false
  let polling: PollWait | undefined
  const onAbort = () => polling?.interrupt()
  try {
    for (;;) {
      const outcome = await attempt()
      if ('held' in outcome) return outcome.held
      if (budget.over || polling?.over) return undefined
      if (!subscribed) {
        subscribed = true
        wakeup = await subscribe().catch(() => undefined)
        if (wakeup) continue
      }
      if (poll && (!wakeup || wakeup.interrupt)) {
        if (!polling) {
          polling = poll(budget.deadline, wakeup ? SUBSCRIBED : UNSUBSCRIBED)
          request.signal.addEventListener('abort', onAbort, { once: true })
        }
        await polling.pause(wakeup as Required<Wakeup> | undefined, outcome.busyForMs)
      } else {
        await budget.pause(wakeup, outcome.busyForMs)
      }
      if (request.signal.aborted) return undefined
    }
  } finally {
    request.signal.removeEventListener('abort', onAbort)
    polling?.end()
    wakeup?.release()
  }
}
