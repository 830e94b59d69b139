/** Parent ↔ waiter-process messages of `npm run bench:lock`. */
export type ToWaiter = { type: 'wait'; contender: string; key: string } | { type: 'release'; key: string }
export type FromWaiter =
  | { type: 'ready' }
  | { type: 'waiting'; key: string }
  /** `at`: performance.timeOrigin + performance.now() when acquire resolved. */
  | { type: 'acquired'; key: string; at: number }
  | { type: 'released'; key: string }
  | { type: 'error'; message: string }

/**
 * The contention phase: the parent tells each process which contender and key ('start'), then
 * 'warm-up' (every process contends on a key of its own for `warmUpHolds` holds, unmeasured),
 * then 'go' (the measured holds), then 'close' once every process has reported, so that no
 * process tears down while the others are still measured.
 */
export type ToContention =
  | { type: 'start'; contender: string; key: string; holds: number; warmUpHolds: number }
  | { type: 'warm-up' }
  | { type: 'go' }
  | { type: 'close' }
/** A contention process's holds, in its order; `error`: why it stopped early. */
export interface ContentionReport {
  type: 'done'
  /** `timerLateMs`: how much later than asked the hold's 3–7 ms timer fired. */
  holds: { acquiredAt: number; releasedAt: number; pid: number; timerLateMs: number }[]
  /** The process's GC pauses during its measured holds: start (same clock as the holds) and duration, ms. */
  gcPauses: { at: number; ms: number }[]
  error?: string
}
