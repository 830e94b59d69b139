/**
 * Many deadlines, one timer. A flight's callers each have their own softTimeout,
 * hardTimeout and waitTimeout; arming a timer per caller per deadline made 100,000
 * callers on one key arm 300,000 timers. Here they wait in a min-heap on
 * `performance.now()`, and one unref'd timer is armed for the earliest.
 */
/** What `schedule()` tells when its deadline comes: an object with a method, so an entry needs no closure. */
export interface Timed {
  due(entry: DeadlineEntry): void
}

/** A deadline `schedule()` set: the handle `cancel()` takes. */
export interface DeadlineEntry {
  readonly at: number
}

/** An entry on the timeline: what is told when `at` comes (undefined once fired or cancelled). */
export interface Due extends DeadlineEntry {
  fire: (() => void) | Timed | undefined
}

/** Cancelled entries are dropped when they come due, or all at once past this share of the heap. */
const COMPACT_SHARE = 0.5

export class Deadlines {
  private readonly heap: Due[] = []
  private timer: NodeJS.Timeout | undefined
  private armedFor = Infinity
  private cancelled = 0

  /**
   * Calls `fire` at `at` (a `performance.now()` time), unless `clear()` or the returned
   * cancel comes first. A cancelled entry stays in the heap until it comes due (or the heap
   * is compacted, once cancelled entries are half of it), so cancelling is O(1).
   */
  add(at: number, fire: () => void): () => void {
    const due = this.schedule(at, fire)
    return () => this.cancel(due)
  }

  /**
   * As `add()`, for the many: `owner.due(entry)` is called at `at`, and the entry is the handle
   * to `cancel()` (no closure for either: 20,000 waits on a poll timeline each keep two).
   */
  schedule(at: number, owner: Timed | (() => void)): DeadlineEntry {
    const due: Due = { at, fire: owner }
    this.push(due)
    if (at < this.armedFor) this.arm()
    return due
  }

  /**
   * As `schedule()`, with an object of the caller's as the entry (its `at` and `fire` set):
   * `fire.due(entry)` is called at `at`. A PollWait is its own deadline's entry, one object
   * fewer for each wait. It must not be scheduled again while on the timeline (not yet fired
   * or, if cancelled, not yet dropped).
   */
  scheduleEntry(entry: Due): void {
    this.push(entry)
    if (entry.at < this.armedFor) this.arm()
  }

  /** Cancels a scheduled entry; a no-op once it fired or was cancelled. */
  cancel(entry: DeadlineEntry): void {
    const due = entry as Due
    if (due.fire === undefined) return
    due.fire = undefined
    if (++this.cancelled > this.heap.length * COMPACT_SHARE && this.heap.length > 64) this.compact()
  }

  private push(due: Due): void {
    const heap = this.heap
    heap.push(due)
    for (let i = heap.length - 1; i > 0;) {
      const parent = (i - 1) >> 1
      if (heap[parent]!.at <= heap[i]!.at) break
      ;[heap[parent], heap[i]] = [heap[i]!, heap[parent]!]
      i = parent
    }
  }

  /** Rebuilds the heap from its live entries. */
  private compact(): void {
    const live = this.heap.filter((due) => due.fire !== undefined)
    this.heap.length = 0
    this.cancelled = 0
    for (const due of live) this.push(due)
  }

  /** Drops every deadline and the timer (the flight they belonged to has settled). */
  clear(): void {
    for (const due of this.heap) due.fire = undefined // a cancel handle still held must not count
    this.heap.length = 0
    this.cancelled = 0
    clearTimeout(this.timer)
    this.timer = undefined
    this.armedFor = Infinity
  }

  /** Deadlines still waiting, cancelled ones left out (for tests and benchmarks). */
  get size(): number {
    return this.heap.length - this.cancelled
  }

  private arm(): void {
    clearTimeout(this.timer)
    while (this.heap.length > 0 && this.heap[0]!.fire === undefined) this.pop() // cancelled
    const next = this.heap[0]
    if (!next) {
      this.timer = undefined
      this.armedFor = Infinity
      return
    }
    this.armedFor = next.at
    this.timer = setTimeout(() => this.run(), Math.max(1, Math.ceil(next.at - performance.now())))
    this.timer.unref()
  }

  private run(): void {
    this.timer = undefined
    this.armedFor = Infinity
    // Node timers count whole milliseconds: allow 1 ms so a due deadline is not re-armed for nothing.
    const now = performance.now() + 1
    while (this.heap.length > 0 && this.heap[0]!.at <= now) {
      const due = this.pop()
      const fire = due.fire
      if (fire === undefined) continue
      due.fire = undefined // a cancel after it fired is a no-op
      try {
        if (typeof fire === 'function') fire()
        else fire.due(due)
      } catch {
        // A deadline's callback settles its own caller; it must not stop the others.
      }
    }
    if (this.timer === undefined) this.arm() // a callback may have added (and armed) already
  }

  /** Takes the earliest entry out (its `fire` is undefined if it was cancelled). */
  private pop(): Due {
    const heap = this.heap
    const top = heap[0]!
    if (top.fire === undefined) this.cancelled--
    const last = heap.pop()!
    if (heap.length > 0) {
      heap[0] = last
      for (let i = 0; ;) {
        const left = 2 * i + 1
        const right = left + 1
        let smallest = i
        if (left < heap.length && heap[left]!.at < heap[smallest]!.at) smallest = left
        if (right < heap.length && heap[right]!.at < heap[smallest]!.at) smallest = right
        if (smallest === i) break
        ;[heap[smallest], heap[i]] = [heap[i]!, heap[smallest]!]
        i = smallest
      }
    }
    return top
  }
}
