import type { Wakeup } from '../waiting.js'

/**
 * A waiter's wake-up on a channel that is its alone (a fair lock's or a semaphore's waiter:
 * the releaser publishes to the one it hands to). Its release wakes a pending `next()` at
 * once, but sends the UNSUBSCRIBE on the next turn of the event loop, so that a waiter
 * handed the lock or a permit runs its critical section first. Safe to defer: nobody
 * subscribes to that channel again.
 */
export function onOwnChannel(wakeup: Required<Wakeup>): Required<Wakeup> {
  return {
    next: (timeoutMs) => wakeup.next(timeoutMs),
    interrupt: () => wakeup.interrupt(),
    release: () => {
      wakeup.interrupt()
      setImmediate(() => wakeup.release())
    },
  }
}
