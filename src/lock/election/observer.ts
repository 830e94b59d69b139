import { delay, nextBackoff } from '../../timers.js'
import type { ElectionStore, Leader, LeaderFeed } from './store.js'

/** With a live feed, the leader is re-read at least this often anyway (a message lost with a connection). */
const SAFETY_REREAD_MS = 5_000
const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 2_000

/**
 * `locks.observe(name)`: who leads, and each change, read from the store without
 * campaigning. Iterate it (`for await (const leader of observer)`: the leader at start,
 * then each change; `undefined` while nobody leads), or read `leader`. It subscribes
 * before each read (so no change falls in between), re-reads on every piece of news, and
 * when the leader's lease could run out without news (a crashed leader tells no one).
 * Terms never go backwards: a reading older than one already reported is dropped.
 * Store failures are retried (100 ms → 2 s) and given to `onError`; meanwhile the last
 * reading stands. Ends with `close()`, `await using`, or its `signal`.
 */
export class LeaderObserver implements AsyncIterable<Leader | undefined>, AsyncDisposable {
  private readonly controller = new AbortController()
  private latest: Leader | undefined
  private known = false
  private readonly queue: (Leader | undefined)[] = []
  private wake: (() => void) | undefined
  /** Settles once the first reading is in (or the observer ended first). */
  readonly ready: Promise<void>
  private markReady!: () => void
  private readonly running: Promise<void>

  constructor(
    readonly name: string,
    private readonly store: ElectionStore,
    signal: AbortSignal | undefined,
    closing: AbortSignal,
    private readonly onError: ((error: unknown) => void) | undefined,
  ) {
    this.ready = new Promise((resolve) => (this.markReady = resolve))
    const stop = () => this.controller.abort()
    this.controller.signal.addEventListener(
      'abort',
      () => {
        for (const source of [signal, closing]) source?.removeEventListener('abort', stop)
        this.markReady()
        this.wake?.()
      },
      { once: true },
    )
    for (const source of [signal, closing]) {
      if (source?.aborted) stop()
      else source?.addEventListener('abort', stop, { once: true })
    }
    this.running = this.run()
  }

  /** The leader as last read (`undefined`: nobody leads, or nothing read yet; see `ready`). */
  get leader(): Leader | undefined {
    return this.latest
  }

  /** True once closed. */
  get closed(): boolean {
    return this.controller.signal.aborted
  }

  async close(): Promise<void> {
    this.controller.abort()
    await this.running
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Leader | undefined> {
    for (;;) {
      if (this.queue.length > 0) {
        yield this.queue.shift()
        continue
      }
      if (this.closed) return
      await new Promise<void>((resolve) => (this.wake = resolve))
      this.wake = undefined
    }
  }

  private report(leader: Leader | undefined): void {
    const same = this.known && this.latest?.term === leader?.term && this.latest?.id === leader?.id
    if (same) return
    // A stale read (an older term after a newer one was reported) is not news.
    if (leader && this.latest && leader.term < this.latest.term) return
    this.known = true
    this.latest = leader
    this.queue.push(leader)
    this.wake?.()
  }

  private async run(): Promise<void> {
    const signal = this.controller.signal
    let feed: LeaderFeed | undefined
    let pauseMs = RETRY_FIRST_MS
    const stopFeed = () => feed?.close()
    signal.addEventListener('abort', stopFeed, { once: true })
    try {
      while (!signal.aborted) {
        try {
          feed ??= await this.store.feed(this.name)
          if (signal.aborted) return
          const reading = await this.store.read(this.name, feed)
          this.report(reading.leader)
          this.markReady()
          pauseMs = RETRY_FIRST_MS
          await feed.next(Math.max(1, Math.min(SAFETY_REREAD_MS, reading.recheckInMs + 1)))
        } catch (error) {
          if (signal.aborted) return
          this.onError?.(error)
          feed?.close()
          feed = undefined
          const pause = delay(pauseMs)
          const cancel = () => pause.cancel()
          signal.addEventListener('abort', cancel, { once: true })
          await pause.promise
          signal.removeEventListener('abort', cancel)
          pauseMs = nextBackoff(pauseMs, RETRY_MAX_MS)
        }
      }
    } finally {
      signal.removeEventListener('abort', stopFeed)
      feed?.close()
    }
  }
}
