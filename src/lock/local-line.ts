import { delay } from '../timers.js'

/**
 * Waiters for one key in this process wait on the store one at a time: each starts once
 * the one before it has *acquired* (or given up), not released, so at a release every
 * process has one contender woken, as fair across processes as the backend is, instead
 * of every caller of every process racing for it. `tryAcquire` (no wait) skips the line.
 */
export class LocalLine {
  /** Per key, the newest acquisition of this process still waiting on the store. */
  private readonly waiting = new Map<string, Promise<unknown>>()

  async inTurn<T>(
    key: string,
    waitMs: number,
    signal: AbortSignal,
    attempt: (waitMs: number) => Promise<T | undefined>,
  ): Promise<T | undefined> {
    if (waitMs === 0) return attempt(0)
    const ahead = this.waiting.get(key)
    const startedAt = performance.now()
    const turn = (async () => {
      if (ahead && !(await settlesWithin(ahead, waitMs, signal))) return undefined
      return attempt(Math.max(0, Math.round(waitMs - (performance.now() - startedAt))))
    })()
    this.waiting.set(key, turn)
    try {
      return await turn
    } finally {
      if (this.waiting.get(key) === turn) this.waiting.delete(key)
    }
  }
}

/** Whether `promise` settled (either way) within `ms`, before `signal` aborted. */
async function settlesWithin(promise: Promise<unknown>, ms: number, signal: AbortSignal): Promise<boolean> {
  const timeout = delay(ms)
  const onAbort = () => timeout.cancel()
  signal.addEventListener('abort', onAbort, { once: true })
  try {
    return await Promise.race([
      promise.then(
        () => true,
        () => true,
      ),
      timeout.promise.then(() => false),
    ])
  } finally {
    timeout.cancel()
    signal.removeEventListener('abort', onAbort)
  }
}
