/**
 * In-process single-flight: however many callers ask for one key at once, one
 * async job runs and they all share its promise. This is what bounds Redis traffic
 * to one trip per key per process, and the loader to one run per key per process
 * when Redis is down.
 */
export class SingleFlight<T> {
  private readonly inFlight = new Map<string, Promise<T>>()

  /** `joined` is true when the caller shares a job another caller started. */
  run(key: string, job: () => Promise<T>): { promise: Promise<T>; joined: boolean } {
    const existing = this.inFlight.get(key)
    if (existing) return { promise: existing, joined: true }
    const promise = job().finally(() => {
      if (this.inFlight.get(key) === promise) this.inFlight.delete(key)
    })
    this.inFlight.set(key, promise)
    return { promise, joined: false }
  }

  has(key: string): boolean {
    return this.inFlight.has(key)
  }

  /** Settles once every job now in flight has settled. */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.inFlight.values()])
  }
}
