/**
 * An ioredis client as the public API accepts it: a `Redis` (standalone or Sentinel) or a
 * `Cluster`, of ioredis 5 or 6. Typed by its shape rather than by ioredis's classes, so
 * the app's own ioredis major is the one that counts, and this package's `.d.ts` never
 * load ioredis's. Checked at run time too: an object without these members is refused
 * with an `InvalidArgumentError` naming the option.
 */
export interface RedisClientLike {
  /** The connection's state (`'wait'`, `'connecting'`, `'ready'`, `'end'`, …). */
  readonly status: string
  /** `true` on a `Cluster`. */
  readonly isCluster: boolean
  // Parameters are `never[]`: any signature of ioredis 5's or 6's fits.
  defineCommand(...args: never[]): unknown
  duplicate(...args: never[]): unknown
}
