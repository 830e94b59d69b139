/** Parent ↔ waiter-process messages of `npm run bench:lock`. */
export type ToWaiter = { type: 'wait'; contender: string; key: string } | { type: 'release'; key: string }
export type FromWaiter =
  | { type: 'ready' }
  | { type: 'waiting'; key: string }
  /** `at`: performance.timeOrigin + performance.now() when acquire resolved. */
  | { type: 'acquired'; key: string; at: number }
  | { type: 'released'; key: string }
  | { type: 'error'; message: string }
