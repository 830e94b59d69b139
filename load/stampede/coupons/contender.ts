/** What a coupon contender is: how the scenario creates one, and what each issue returns. */
import type pg from 'pg'

export interface CouponIssue {
  outcome: 'issued' | 'sold-out' | 'fenced' | 'gave-up'
  /** Extra attempts it took (optimistic retries); 0 for locks, whose waiting is inside. */
  retries: number
}

export interface CouponContender {
  issue(userId: number): Promise<CouponIssue>
  close(): Promise<void>
}

export interface ContenderContext {
  pool: pg.Pool
  schema: string
  couponId: number
  redisUrl: string
}

export interface ContenderEntry {
  /** One line for the report. */
  describe: string
  create(context: ContenderContext): Promise<CouponContender>
}
