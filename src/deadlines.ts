/**
 * Many deadlines, one timer. A flight's callers each have their own softTimeout,
 * hardTimeout and waitTimeout; arming a timer per caller per deadline made 100,000
 * callers on one key arm 300,000 timers. Here they wait in a min-heap on
 * `performance.now()`, and one unref'd timer is armed for the earliest.
 */
interface Due {
  at: number
  fire: () => void
}

export class Deadlines {
  private readonly heap: Due[] = []
  private timer: NodeJS.Timeout | undefined
  private armedFor = Infinity

  /** Calls `fire` at `at` (a `performance.now()` time), unless `clear()` comes first. */
  add(at: number, fire: () => void): void {
    const heap = this.heap
    heap.push({ at, fire })
    for (let i = heap.length - 1; i > 0;) {
      const parent = (i - 1) >> 1
      if (heap[parent]!.at <= heap[i]!.at) break
      ;[heap[parent], heap[i]] = [heap[i]!, heap[parent]!]
      i = parent
    }
    if (at < this.armedFor) this.arm()
  }

  /** Drops every deadline and the timer (the flight they belonged to has settled). */
  clear(): void {
    this.heap.length = 0
    clearTimeout(this.timer)
    this.timer = undefined
    this.armedFor = Infinity
  }

  /** Deadlines still waiting (for tests and benchmarks). */
  get size(): number {
    return this.heap.length
  }

  private arm(): void {
    clearTimeout(this.timer)
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
      try {
        due.fire()
      } catch {
        // A deadline's callback settles its own caller; it must not stop the others.
      }
    }
    if (this.timer === undefined) this.arm() // a callback may have added (and armed) already
  }

  private pop(): Due {
    const heap = this.heap
    const top = heap[0]!
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
