/**
 * Makes a source fail a fraction of its queries (the `flaky` scenario). The failure
 * happens after the query's latency, as a real timeout or a dropped connection would:
 * a failing database is not a fast one.
 */
import type { Item, ItemSource } from './source.js'

export class DatabaseUnavailableError extends Error {
  constructor(id: number) {
    super(`database failed the query for item ${id} (injected fault)`)
    this.name = 'DatabaseUnavailableError'
  }
}

export class FaultInjectingSource implements ItemSource {
  /** 0 = healthy, 0.5 = every other query fails on average. Changed live by the harness. */
  failureRate = 0

  constructor(
    private readonly inner: ItemSource,
    private readonly random: () => number = Math.random,
  ) {}

  async load(id: number): Promise<Item> {
    const fail = this.random() < this.failureRate
    const item = await this.inner.load(id)
    if (fail) throw new DatabaseUnavailableError(id)
    return item
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}
