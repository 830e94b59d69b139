/** Messages between the wake-up benchmark's parent and its child processes. */

export type Strategy = 'stampede-guard' | 'spin-lock'

export type ParentToChild =
  | { type: 'clock'; seq: number }
  | { type: 'lead'; strategy: Strategy; key: string; holdMs: number }
  | { type: 'wait'; strategy: Strategy; key: string; callers: number }
  | { type: 'exit' }

export type ChildToParent =
  | { type: 'ready' }
  | { type: 'clock'; seq: number; now: number }
  /** The leader is inside its loader (holds the lock): the waiters can be sent in. */
  | { type: 'loading'; key: string }
  | { type: 'led'; key: string; loaderDoneAt: number; returnedAt: number }
  | { type: 'waited'; key: string; samples: { startedAt: number; returnedAt: number; ranLoader: boolean }[] }
  | { type: 'error'; message: string }
