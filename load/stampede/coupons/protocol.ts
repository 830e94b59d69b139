/** Messages between the coupon scenario (parent) and its worker processes. */

export type ToWorker = { type: 'run'; contender: string; users: number[]; concurrency: number }

export type FromWorker =
  | { type: 'ready' }
  | { type: 'done'; latenciesMs: number[]; outcomes: Record<string, number>; retries: number; errors: string[] }
