/** Messages between `npm run bench:waiting` and its two child processes (the holder and the waiter). */

export type ParentToChild =
  /** Holder: start `keys` loads that hold their lock until `release`. Waiter: ask for the same keys. */
  | { type: 'start'; keys: number; prefix: string }
  /** Start counting: commands sent, event-loop delay. */
  | { type: 'sample' }
  /** Stop counting and report. */
  | { type: 'report' }
  /** Holder: let every loader return. */
  | { type: 'release' }
  | { type: 'exit' }

export interface Sample {
  /** Commands this process sent in the window, by name (a script call by its file name). */
  commands: Record<string, number>
  windowMs: number
  /** Event-loop delay over the window, ms. */
  loopP99Ms: number
  /** The cache's counters (`stats()`) at the end of the window. */
  stats: Record<string, number>
}

export type ChildToParent =
  | { type: 'ready' }
  /** Holder: every loader is running (every lock taken). Waiter: this many calls reached their wait (or were answered). */
  | {
      type: 'started'
      waiting: number
      settled: number
      heapPerWait?: number
      /** heapPerWait less the harness's own heap per pending call (harnessHeapPerCall). */
      heapNetPerWait?: number
      loads?: number
      stats?: Record<string, number>
    }
  | { type: 'sample'; sample: Sample }
  /** Every call returned: loader runs here, how the calls ended, and when each key's call returned (epoch ms). */
  | {
      type: 'done'
      loads: number
      errors: number
      stats: Record<string, number>
      lostReasons: Record<string, number>
      answeredAt: number[]
      /**
       * The longest synchronous stretches, by work done in one turn of the event loop (a
       * turn ends at the next setImmediate): most calls answered in one turn, and most parked
       * waits resumed in one turn by the cache's wake queue. Counts, not times: the machine is shared.
       */
      perTurn: { answered: number; resumed: number }
    }
  | { type: 'error'; message: string }
