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
  /**
   * Ends a run, also one whose lease was lost. `'again'`: a trigger came meanwhile and the
   * claim is ours once more (taken back if it had run out and nobody took it), under a fresh
   * lease started no earlier than this call, which `renew` extends from then on; `'done'`:
   * the claim is free; `'lost'`: another runner holds it, so a pending trigger is its to run.
   * Safe to retry after an error: a finish that was applied answers the same again.
   * `handOver: false` (the runner is closing): never `'again'`; the claim is freed and a
   * pending trigger left to the next trigger.
   */
  finish(leaseMs: number, handOver?: boolean): Promise<'again' | 'done' | 'lost'>
}
