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
  /** Flights still running, attached or detached, and what idle() resolves once there are none. */
  private running = 0
  private drained: { promise: Promise<void>; resolve: () => void } | undefined

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
    this.running++
    const end = this.ender(key, flight) // one closure for both outcomes: each waiting flight keeps it
    flight.promise.then(end, end)
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

  /** Resolves once no flight is running (close() waits for it): a count, not a set, on the hit path. */
  idle(): Promise<void> {
    if (this.running === 0) return Promise.resolve()
    if (!this.drained) {
      let resolve!: () => void
      const promise = new Promise<void>((settle) => (resolve = settle))
      this.drained = { promise, resolve }
    }
    return this.drained.promise
  }

  get size(): number {
    return this.running
  }

  /** What ends `flight` once it settles. Returned unnamed: tsx names each named closure it creates (a call per flight). */
  private ender(key: string, flight: Flight<T, N>): () => void {
    return () => this.end(key, flight)
  }

  private end(key: string, flight: Flight<T, N>): void {
    if (--this.running === 0 && this.drained) {
      this.drained.resolve()
      this.drained = undefined
    }
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
