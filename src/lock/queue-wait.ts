import { abortable } from './backend-calls.js'
import { delay } from '../timers.js'

/**
 * What the queue backends (etcd, ZooKeeper) share while a waiter watches its predecessor:
 * the safety-net re-read of a watch that stayed silent, and reads tried again through a
 * failover or a reconnect.
 */

/** First safety-net re-read of a wait that saw no watch event, ms; doubles up to the cap. */
export const WATCH_POLL_START_MS = 1_000
export const WATCH_POLL_CAP_MS = 8_000
/** Pause before a failed read of the queue is tried again, ms. */
const READ_RETRY_MS = 100

/**
 * A read while waiting, tried again `READ_RETRY_MS` after each failure `retriable` accepts
 * until `deadline`; then the last error. Reads only: nothing is written twice. `step`
 * ends the read and the pause early when the wait is aborted.
 */
export async function readWhileWaiting<T>(
  read: () => Promise<T>,
  deadline: number,
  retriable: (err: unknown) => boolean,
  step: <R>(promise: Promise<R>) => Promise<R>,
): Promise<T> {
  for (;;) {
    try {
      return await step(read())
    } catch (err) {
      const left = deadline - performance.now()
      if (left <= 0 || !retriable(err)) throw err
      await step(delay(Math.min(READ_RETRY_MS, left)).promise)
    }
  }
}

/** Resolves 'fired' once `fired` does (a one-shot watch), 'silent' after `ms`; rejects on abort. */
export async function firedOrSilent(
  fired: Promise<void>,
  ms: number,
  signal: AbortSignal,
): Promise<'fired' | 'silent'> {
  let timer: NodeJS.Timeout | undefined
  const silent = new Promise<'silent'>((resolve) => {
    timer = setTimeout(() => resolve('silent'), ms)
    timer.unref()
  })
  try {
    return await abortable(Promise.race([fired.then(() => 'fired' as const), silent]), signal, () => {})
  } finally {
    clearTimeout(timer)
  }
}
