import { delay } from '../../timers.js'
import type { LeaderFeed } from './store.js'

/**
 * A feed for watch-based stores (etcd, ZooKeeper): `notify()` marks news (a watch event)
 * and wakes a pending `next()`; news that came while nobody waited is kept for the next
 * one, so a change between two reads is never slept through.
 */
export class NewsLatch implements LeaderFeed {
  private news = false
  private wake: (() => void) | undefined
  private closed = false

  constructor(private readonly onClose: () => void = () => {}) {}

  notify(): void {
    this.news = true
    this.wake?.()
  }

  async next(timeoutMs: number): Promise<void> {
    if (!this.news && !this.closed) {
      const pause = delay(timeoutMs)
      this.wake = () => pause.cancel()
      await pause.promise
      this.wake = undefined
    }
    this.news = false
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.wake?.()
    this.onClose()
  }
}
