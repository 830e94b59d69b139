/**
 * An in-process counting semaphore: at most `size` holders at once, waiters served in
 * arrival order. `loaderConcurrency` puts one of `limit` permits in front of the fleet's:
 * a process never needs more than `limit` of the fleet's permits at once, so only that many
 * of its loads stand in the Redis line (the rest wait here, at no cost to Redis), and it is
 * the cap that still holds, per process, when Redis cannot be asked.
 */
/** setTimeout's longest delay; a longer wait gives up after it (about 24 days). */
const MAX_TIMER_MS = 2 ** 31 - 1

export class LocalPermits {
  private held = 0
  private readonly waiting: Array<(taken: boolean) => void> = []

  constructor(private readonly size: number) {}

  /** Takes a permit if one is free now and nobody waits first. */
  tryTake(): boolean {
    if (this.held >= this.size || this.waiting.length > 0) return false
    this.held++
    return true
  }

  /**
   * Takes a permit, waiting up to `waitMs` in line: true when taken, false when the wait
   * ran out; rejects with `signal`'s reason when it aborts first.
   */
  take(waitMs: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.reject(signal.reason as Error)
    if (this.tryTake()) return Promise.resolve(true)
    if (waitMs <= 0) return Promise.resolve(false)
    return new Promise<boolean>((resolve, reject) => {
      const settle = (taken: boolean) => {
        clearTimeout(timer)
        signal.removeEventListener('abort', onAbort)
        resolve(taken)
      }
      const leave = () => {
        const at = this.waiting.indexOf(settle)
        if (at >= 0) this.waiting.splice(at, 1)
      }
      const onAbort = () => {
        leave()
        clearTimeout(timer)
        reject(signal.reason as Error)
      }
      const timer = setTimeout(
        () => {
          leave()
          signal.removeEventListener('abort', onAbort)
          resolve(false)
        },
        Math.min(waitMs, MAX_TIMER_MS),
      )
      signal.addEventListener('abort', onAbort, { once: true })
      this.waiting.push(settle)
    })
  }

  /** Gives a permit back: to the first waiter, else to the pool. */
  give(): void {
    const next = this.waiting.shift()
    if (next) next(true)
    else this.held--
  }
}
