/**
 * The coupon contest across processes (the seeds' test): N worker processes issue coupons
 * from one PostgreSQL stock through `examples/coupon-issue.ts`, each holding the lock from
 * the backend under test. Any backend plugs in with a factory module (see factories/).
 *
 * Worker argv: `<kind> <factory module path>`; env `COUPON_CONFIG` = JSON `WorkerConfig`.
 * Request: `IssueBatch`; reply: `BatchResult`.
 */
import type { Locks } from '../../../src/index.js'

/** What a factory module's default export builds in each worker. */
export interface LockFactory {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each backend's factory takes its own config
  (config: any): Promise<{ locks: Locks<any>; close(): Promise<void> }>
}

export interface WorkerConfig {
  /** Passed to the factory as is: ports, namespaces, … */
  backend: unknown
  /** PostgreSQL database holding the schema. */
  database: string
  schema: string
  couponId: number
  /** Check the fencing token on the row (off for Redlock). */
  fence: boolean
}

export interface IssueBatch {
  users: number[]
  /** Issues in flight at once in this worker. */
  concurrency: number
}

export interface BatchResult {
  issued: number
  soldOut: number
  fenced: number
  errors: string[]
}
