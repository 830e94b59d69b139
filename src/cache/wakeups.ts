/** A parked wait whose news came: resuming it runs its flight on from where it parked. */
export interface Resumable {
  resume(): void
}

/**
 * Most parked waits resumed in one turn of the event loop. A poll reply finds up to 500 locks
 * gone at once, and a socket read can carry hundreds of commit messages: each resumed wait
 * decodes a value or sends a lookup and answers its callers, so 500 in one turn held the loop
 * for tens of milliseconds. The first turn's share runs at once (a lone waiter waits no
 * longer than before); the rest follow on the next turns, after I/O.
 */
export const RESUMES_PER_TURN = 64

/**
 * The cache's woken waits, resumed in order, at most RESUMES_PER_TURN a turn: the commit
 * message handler and the shared poll hand their wakes here rather than resuming each flight
 * where the news was read (inside a poll reply's loop, or the subscriber's message loop).
 */
export class Wakeups {
  private queue: (Resumable | undefined)[] = []
  private head = 0
  private scheduled = false
  /** Waits resumed, turns that resumed any, and the most resumed in one turn (tests and benchmarks). */
  readonly counts = { resumed: 0, turns: 0, mostInOneTurn: 0 }
  /** One bound function for every drain (a closure per wake would cost each one). */
  private readonly drainBound = () => this.drain()

  add(wait: Resumable): void {
    this.queue.push(wait)
    if (this.scheduled) return
    this.scheduled = true
    queueMicrotask(this.drainBound)
  }

  private drain(): void {
    const end = Math.min(this.queue.length, this.head + RESUMES_PER_TURN)
    const counts = this.counts
    counts.turns++
    counts.mostInOneTurn = Math.max(counts.mostInOneTurn, end - this.head)
    counts.resumed += end - this.head
    while (this.head < end) {
      const wait = this.queue[this.head]!
      this.queue[this.head++] = undefined
      try {
        wait.resume()
      } catch {
        // A resumed flight settles its own callers; it must not stop the others.
      }
    }
    if (this.head < this.queue.length) {
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head) // wakes keep coming: drop the resumed part
        this.head = 0
      }
      setImmediate(this.drainBound)
      return
    }
    this.queue = []
    this.head = 0
    this.scheduled = false
  }
}
