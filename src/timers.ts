/** A cancellable, unref'd delay: pending stampede-guard timers never keep a process alive. */
export interface Delay {
  readonly promise: Promise<void>
  cancel(): void
}

export function delay(ms: number): Delay {
  let timer: NodeJS.Timeout | undefined
  let settle: () => void = () => {}
  const promise = new Promise<void>((resolve) => {
    settle = resolve
    timer = setTimeout(resolve, Math.max(0, ms))
    timer.unref()
  })
  return {
    promise,
    cancel() {
      clearTimeout(timer)
      settle()
    },
  }
}

/** Rejects with `onTimeout()` if `promise` has not settled within `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms)
    timer.unref()
  })
  promise.catch(() => {}) // it may lose the race; its late rejection is not unhandled
  return Promise.race([promise, timedOut]).finally(() => clearTimeout(timer))
}

/**
 * The next pause of a doubling backoff: twice `currentMs`, capped at `maxMs`, then jittered
 * down by up to 25 % (never up: the cap is what the docs promise, and spread waiters apart).
 */
export function nextBackoff(currentMs: number, maxMs: number): number {
  return Math.min(maxMs, currentMs * 2) * (0.75 + Math.random() / 4)
}
