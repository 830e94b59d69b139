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
  /** Every flight still running, attached or detached (close() waits for them). */
  private readonly running = new Set<Promise<T>>()

  /** `settled`: called once a flight has settled and left the map, with its key. */
  constructor(private readonly settled: (key: string) => void = () => {}) {}

  /** The flight running for `key`, to join. */
  get(key: string): Flight<T, N> | undefined {
    return this.inFlight.get(key)
  }

  /**
   * Starts the flight for `key` (none may be running): `job` runs at once, and its promise
   * is the flight's (no promise wraps it: this is on every Redis hit's path).
   */
  start(key: string, notes: N, job: (notes: N) => Promise<T>): Flight<T, N> {
    const flight: Flight<T, N> = { promise: job(notes), notes }
    this.inFlight.set(key, flight)
    this.running.add(flight.promise)
    const done = () => this.end(key, flight)
    flight.promise.then(done, done)
    return flight
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

  /** The flights running now (attached or detached). */
  all(): Promise<T>[] {
    return [...this.running]
  }

  private end(key: string, flight: Flight<T, N>): void {
    this.running.delete(flight.promise)
    if (this.inFlight.get(key) === flight) {
      this.inFlight.delete(key)
    } else {
      const left = (this.detached.get(key) ?? 1) - 1
      if (left > 0) this.detached.set(key, left)
      else this.detached.delete(key)
    }
    this.settled(key)
  }
}
