/**
 * In-process single-flight: however many callers ask for one key at once, one
 * async job runs and they all share it. This is what bounds Redis traffic to one trip
 * per key per process, and the loader to one run per key per process when Redis is down.
 *
 * Each flight carries `notes` that its job fills in as it learns things (the stale
 * fallback), so every caller's own timeouts can answer from them.
 */
export interface Flight<T, N> {
  readonly promise: Promise<T>
  readonly notes: N
}

export class SingleFlight<T, N> {
  private readonly inFlight = new Map<string, Flight<T, N>>()
  /** Flights detached by `detach()` that are still running, per key. */
  private readonly detached = new Map<string, number>()

  /** `joined` is true when the caller shares a flight another caller started. */
  run(key: string, notes: N, job: (notes: N) => Promise<T>): { flight: Flight<T, N>; joined: boolean } {
    const existing = this.inFlight.get(key)
    if (existing) return { flight: existing, joined: true }
    const promise = job(notes).finally(() => {
      if (this.inFlight.get(key) === flight) {
        this.inFlight.delete(key)
      } else {
        const left = (this.detached.get(key) ?? 1) - 1
        if (left > 0) this.detached.set(key, left)
        else this.detached.delete(key)
      }
    })
    const flight: Flight<T, N> = { promise, notes }
    this.inFlight.set(key, flight)
    return { flight, joined: false }
  }

  has(key: string): boolean {
    return this.inFlight.has(key)
  }

  /** Is any flight for `key` still running, attached or detached? */
  busy(key: string): boolean {
    return this.inFlight.has(key) || this.detached.has(key)
  }

  /** Later callers start a new flight; the current one runs on for its own callers. */
  detach(key: string): void {
    if (!this.inFlight.delete(key)) return
    this.detached.set(key, (this.detached.get(key) ?? 0) + 1)
  }
}
