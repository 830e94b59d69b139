import { parseDuration, type Duration } from '../../duration.js'
import { InvalidArgumentError } from '../../errors.js'
import type { PostgresKeyMapping } from './keys.js'

/** What stampede-guard uses of a `pg` query result. */
export interface PgResult {
  rows: Record<string, unknown>[]
  command?: string
}

/** The part of a `pg` Client or PoolClient the backend uses (structural, so `pg` stays an optional peer). */
export interface PgClientLike {
  query(text: string, values?: unknown[]): Promise<PgResult | PgResult[]>
  on(event: 'error' | 'end', listener: (err?: Error) => void): unknown
  removeListener(event: 'error' | 'end', listener: (err?: Error) => void): unknown
}

export interface PgPoolClientLike extends PgClientLike {
  /** `release(err)` destroys the connection instead of returning it to the pool. */
  release(err?: Error | boolean): void
}

export interface PgStandaloneClientLike extends PgClientLike {
  connect(): Promise<unknown>
  end(): Promise<void>
}

/** The part of a `pg` Pool the backend uses. */
export interface PgPoolLike {
  connect(): Promise<PgPoolClientLike>
  query(text: string, values?: unknown[]): Promise<PgResult>
  /** pg-pool's client class and config: session mode opens its own connection with them. */
  readonly Client?: new (config: unknown) => PgStandaloneClientLike
  readonly options?: { port?: number; connectionString?: string }
}

export interface PostgresLockOptions {
  /** The application's `pg` Pool. Transaction mode borrows a client per lock; session mode opens its own connection with the pool's settings. */
  pool: PgPoolLike
  /**
   * - `'transaction'` (default): `pg_advisory_xact_lock` in a transaction on a pooled client,
   *   released by COMMIT/ROLLBACK. Safe behind transaction-mode poolers (PgBouncer).
   *   `withLock` hands `fn` that client as `resource`, so its writes commit with the lock held.
   * - `'session'`: `pg_advisory_lock` on a dedicated connection opened for the hold and closed
   *   after it, never a pooled one. For long holds that must not pin a transaction open.
   *   Unsafe behind a transaction-mode pooler: refused when detected.
   */
  mode?: 'transaction' | 'session'
  /** Keeps this application's locks apart from other applications' on the same database. Default: `createLocks`' `namespace` (`'sg-lock'`). */
  namespace?: string
  /** Text key → advisory key; see {@link PostgresKeyMapping} for the collision odds. Default `'hash64'`. */
  keys?: PostgresKeyMapping
  /** Schema of the fencing-counter and run-once tables, created on first use. Default `'stampede_guard'`. */
  schema?: string
  /** Issue fencing tokens from the counter table (one more statement per acquisition). Default `true`. */
  fencing?: boolean
  /** Bound on every database call that is not the lock wait itself (connect, BEGIN, the counter, COMMIT, unlock): ms or `'5s'`. Default 5 s. */
  timeout?: Duration
}

export interface PostgresSettings {
  pool: PgPoolLike
  mode: 'transaction' | 'session'
  namespace: string
  keys: PostgresKeyMapping
  schema: string
  fencing: boolean
  timeoutMs: number
}

const OPTION_NAMES = new Set(['pool', 'mode', 'namespace', 'keys', 'schema', 'fencing', 'timeout'])
/** An unquoted PostgreSQL identifier: we quote it anyway, but refuse anything that would need escaping. */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

export function isPgPool(value: unknown): value is PgPoolLike {
  const candidate = value as PgPoolLike | null
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.connect === 'function' &&
    typeof candidate.query === 'function'
  )
}

export function parsePostgresOptions(
  input: PgPoolLike | PostgresLockOptions,
  defaults: { namespace?: string } = {},
): PostgresSettings {
  const options: PostgresLockOptions = isPgPool(input) ? { pool: input } : input
  if (typeof options !== 'object' || options === null)
    throw new InvalidArgumentError('postgres', 'expected a pg Pool or { pool, ... }')
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name))
      throw new InvalidArgumentError(
        `postgres.${name}`,
        `unknown option; expected one of ${[...OPTION_NAMES].join(', ')}`,
      )
  }
  if (!isPgPool(options.pool))
    throw new InvalidArgumentError('postgres.pool', 'expected a pg Pool (an object with connect() and query())')
  const mode = options.mode ?? 'transaction'
  if (mode !== 'transaction' && mode !== 'session')
    throw new InvalidArgumentError('postgres.mode', `expected 'transaction' or 'session', got ${JSON.stringify(mode)}`)
  if (mode === 'session' && typeof options.pool.Client !== 'function') {
    throw new InvalidArgumentError(
      'postgres.pool',
      "session mode opens its own connection with the pool's Client class and options; this pool exposes neither (pass a pg Pool)",
    )
  }
  const namespace = options.namespace ?? defaults.namespace ?? 'sg-lock'
  if (typeof namespace !== 'string' || namespace.length === 0 || namespace.length > 64) {
    throw new InvalidArgumentError('postgres.namespace', 'expected a non-empty string of at most 64 characters')
  }
  const keys = options.keys ?? 'hash64'
  if (keys !== 'hash64' && keys !== 'int4pair')
    throw new InvalidArgumentError('postgres.keys', `expected 'hash64' or 'int4pair', got ${JSON.stringify(keys)}`)
  const schema = options.schema ?? 'stampede_guard'
  if (typeof schema !== 'string' || !IDENTIFIER.test(schema)) {
    throw new InvalidArgumentError(
      'postgres.schema',
      `expected a plain identifier (letters, digits, _; at most 63), got ${JSON.stringify(schema)}`,
    )
  }
  const fencing = options.fencing ?? true
  if (typeof fencing !== 'boolean') throw new InvalidArgumentError('postgres.fencing', 'expected a boolean')
  const timeoutMs = parseDuration('postgres.timeout', options.timeout ?? 5_000)
  return { pool: options.pool, mode, namespace, keys, schema, fencing, timeoutMs }
}
