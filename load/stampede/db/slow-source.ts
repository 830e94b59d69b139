/**
 * The built-in database: every query waits `latencyMs` and returns a deterministic row.
 * No I/O, so the only cost it puts on the machine is the wait: what is measured is the
 * cache's behaviour, not a database's CPU.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Item, ItemSource } from './source.js'

export class SlowSource implements ItemSource {
  constructor(private readonly latency: () => number) {}

  async load(id: number): Promise<Item> {
    const ms = this.latency()
    if (ms > 0) await sleep(ms)
    return { id, name: `Item ${id}`, priceCents: 100 + ((id * 7919) % 10_000), loadedAt: Date.now() }
  }

  async close(): Promise<void> {}
}
