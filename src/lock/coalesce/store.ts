/** A backend's coalesced runs (`locks.coalesce`): at most one runner per name, and a pending mark for triggers meanwhile. */
export interface CoalesceStore {
  /** Starts a run (`run`, with its renew/finish) or marks one pending for the runner (`undefined`). */
  begin(name: string, leaseMs: number): Promise<CoalescedRun | undefined>
}

export interface CoalescedRun {
  /** `performance.now()` when the begin was sent: the lease started no earlier. */
  readonly startedAt: number
  /** Extends the runner's lease; `false` once it is not ours. */
  renew(leaseMs: number): Promise<boolean>
  /** `'again'`: a trigger came meanwhile, run once more (lease renewed); `'done'`; `'lost'`: the lease ran out. */
  finish(leaseMs: number): Promise<'again' | 'done' | 'lost'>
}
