import { parseDuration, type Duration } from '../../duration.js'
import { InvalidArgumentError } from '../../errors.js'

/** What the backend uses of a mysql2 promise connection borrowed from a pool. */
export interface MysqlConnectionLike {
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>
  release(): void
  destroy(): void
  readonly threadId: number | null
  /** The callback-API connection underneath: its `error`/`end` events report a lost connection. */
  readonly connection: {
    on(event: 'error' | 'end', listener: (err?: Error) => void): unknown
    removeListener(event: 'error' | 'end', listener: (err?: Error) => void): unknown
  }
}

/** A mysql2 promise pool (`mysql2/promise` `createPool`, or a callback pool's `.promise()`). */
export interface MysqlPoolLike {
  getConnection(): Promise<MysqlConnectionLike>
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>
  end(): Promise<void>
}

/** A mysql2 callback pool: its `.promise()` is used. */
export interface MysqlCallbackPoolLike {
  promise(): MysqlPoolLike
}

export interface MysqlLockOptions {
  /** The application's mysql2 pool (promise or callback API). A lock borrows one connection for its whole hold. Give this or `connection`. */
  pool?: MysqlPoolLike | MysqlCallbackPoolLike
  /** mysql2 connection options (or a URI): the backend opens its own pool (mysql2 loaded on first use) and ends it on close(). */
  connection?: Record<string, unknown> | string
  /**
   * Prefix of every GET_LOCK name, so applications sharing a server stay apart (GET_LOCK names
   * are server-wide). Default: `createLocks`' `namespace` (`'sg-lock'`).
   */
  namespace?: string
  /** Database of the fencing-counter and run-once tables, created on first use. Default: the connection's current database. */
  database?: string
  /** Issue fencing tokens from the counter table (one more statement per acquisition). Default `true`. */
  fencing?: boolean
  /** Bound on every call that is not the lock wait itself (connect, the counter, RELEASE_LOCK): ms or `'5s'`. Default 5 s. */
  timeout?: Duration
  /** Connections of the backend's own pool (with `connection`); each held lock uses one. Default 10. */
  connectionLimit?: number
}

export interface MysqlSettings {
  pool?: MysqlPoolLike
  connection?: Record<string, unknown> | string
  namespace: string
  database?: string
  fencing: boolean
  timeoutMs: number
  connectionLimit: number
}

const OPTION_NAMES = new Set(['pool', 'connection', 'namespace', 'database', 'fencing', 'timeout', 'connectionLimit'])
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_$]{0,63}$/

function isPool(value: unknown): value is MysqlPoolLike | MysqlCallbackPoolLike {
  const candidate = value as { getConnection?: unknown; promise?: unknown } | null
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    (typeof candidate.getConnection === 'function' || typeof candidate.promise === 'function')
  )
}

function promisePool(pool: MysqlPoolLike | MysqlCallbackPoolLike): MysqlPoolLike {
  return typeof (pool as MysqlCallbackPoolLike).promise === 'function'
    ? (pool as MysqlCallbackPoolLike).promise()
    : (pool as MysqlPoolLike)
}

export function parseMysqlOptions(
  input: MysqlPoolLike | MysqlCallbackPoolLike | MysqlLockOptions,
  defaults: { namespace?: string } = {},
): MysqlSettings {
  const options: MysqlLockOptions = isPool(input) ? { pool: input } : input
  if (typeof options !== 'object' || options === null)
    throw new InvalidArgumentError('mysql', 'expected a mysql2 pool or { pool | connection, ... }')
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name))
      throw new InvalidArgumentError(`mysql.${name}`, `unknown option; expected one of ${[...OPTION_NAMES].join(', ')}`)
  }
  if ((options.pool === undefined) === (options.connection === undefined))
    throw new InvalidArgumentError(
      'mysql',
      'give exactly one of pool (a mysql2 pool) and connection (mysql2 connection options)',
    )
  if (options.pool !== undefined && !isPool(options.pool))
    throw new InvalidArgumentError('mysql.pool', 'expected a mysql2 pool (an object with getConnection())')
  if (
    options.connection !== undefined &&
    typeof options.connection !== 'string' &&
    (typeof options.connection !== 'object' || options.connection === null)
  ) {
    throw new InvalidArgumentError('mysql.connection', 'expected mysql2 connection options or a URI string')
  }
  const namespace = options.namespace ?? defaults.namespace ?? 'sg-lock'
  // '#' starts the hashed names (see lockName), so a namespace cannot.
  if (typeof namespace !== 'string' || namespace.length === 0 || namespace.length > 32 || namespace.startsWith('#')) {
    throw new InvalidArgumentError(
      'mysql.namespace',
      'expected a non-empty string of at most 32 characters, not starting with #',
    )
  }
  if (options.database !== undefined && (typeof options.database !== 'string' || !IDENTIFIER.test(options.database))) {
    throw new InvalidArgumentError(
      'mysql.database',
      `expected a plain identifier (letters, digits, _, $; at most 64), got ${JSON.stringify(options.database)}`,
    )
  }
  const fencing = options.fencing ?? true
  if (typeof fencing !== 'boolean') throw new InvalidArgumentError('mysql.fencing', 'expected a boolean')
  const timeoutMs = parseDuration('mysql.timeout', options.timeout ?? 5_000)
  const connectionLimit = options.connectionLimit ?? 10
  if (!Number.isInteger(connectionLimit) || connectionLimit < 1)
    throw new InvalidArgumentError(
      'mysql.connectionLimit',
      `expected a positive integer, got ${String(connectionLimit)}`,
    )
  return {
    pool: options.pool === undefined ? undefined : promisePool(options.pool),
    connection: options.connection,
    namespace,
    database: options.database,
    fencing,
    timeoutMs,
    connectionLimit,
  }
}
