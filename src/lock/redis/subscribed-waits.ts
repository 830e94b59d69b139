import { POLL_ONLY_MAX_MS, type PollBackoff } from '../../redis/poll-scheduler.js'
import { FIRST_POLL_MS, type Wakeup } from '../waiting.js'

/** `redis.maxSubscribedWaits` when not given. */
export const DEFAULT_MAX_SUBSCRIBED_WAITS = 1_000

/**
 * A wait past the budget has no message to wake it, so its poll is the only way it learns of
 * a release: a shorter cap than an unsubscribed wait's 1 s keeps it within about a quarter
 * second of the release, and the scheduler's `maxPollRate` still bounds what all of them cost.
 */
export const POLL_ONLY: PollBackoff = { firstMs: FIRST_POLL_MS, maxMs: POLL_ONLY_MAX_MS }

/**
 * The budget of pub/sub subscriptions of one Redis lock backend's waits: a count of the waits
 * holding one, at most `max`. A wait past it does not subscribe (`undefined`: it polls only);
 * a slot a wait frees is taken by the next wait to start, not handed to one already polling.
 */
export class SubscribedWaits {
  private subscribed = 0

  constructor(private readonly max: number) {}

  /** Waits holding a subscription now. */
  get count(): number {
    return this.subscribed
  }

  /** `subscribe()`'s wakeup while a slot is free, its slot freed on release (or if it fails); else `undefined`. */
  async take(subscribe: () => Promise<Required<Wakeup>>): Promise<Required<Wakeup> | undefined> {
    if (this.subscribed >= this.max) return undefined
    this.subscribed++
    let wakeup: Required<Wakeup>
    try {
      wakeup = await subscribe()
    } catch (error) {
      this.subscribed--
      throw error
    }
    let released = false
    return {
      next: (timeoutMs) => wakeup.next(timeoutMs),
      interrupt: () => wakeup.interrupt(),
      release: () => {
        if (!released) {
          released = true
          this.subscribed--
        }
        wakeup.release()
      },
    }
  }
}
