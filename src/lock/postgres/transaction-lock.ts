import { LockBackendError, LockLostError } from '../../errors.js'
import type { AcquireRequest, HeldLock } from '../backend.js'
import { abortable, asBackendError, borrowBounded, boundedBackendCall } from '../backend-calls.js'
import { ConnectionHold } from '../connection-hold.js'
import { advisoryKey } from './keys.js'
import type { PgPoolClientLike, PgResult, PostgresSettings } from './options.js'
import { nextTokenSql, type PostgresTables } from './schema.js'

/**
 * Which advisory lock a transaction takes, and where its fencing token comes from: the
 * mutex's exclusive lock on the key with the per-key counter row, or a read-write lock's
 * side (see read-write/postgres.ts).
 */
export interface TransactionLockFlavor {
  /** `pg_advisory_xact_lock_shared` instead of `pg_advisory_xact_lock`. */
  readonly shared: boolean
  /** The text hashed into the advisory key, for the user's key. */
  advisoryText(key: string): string
  /** The statement (and its parameters) that issues the token, on the lock's own client. */
  tokenQuery(tables: PostgresTables, namespace: string, key: string): [string, unknown[]]
}

const MUTEX: TransactionLockFlavor = {
  shared: false,
  advisoryText: (key) => key,
  tokenQuery: (tables, namespace, key) => [nextTokenSql(tables.fences), [namespace, key]],
}

/** SQLSTATE 55P03 lock_not_available: `lock_timeout` ran out while waiting. */
export const LOCK_NOT_AVAILABLE = '55P03'

/**
 * Makes the server notice, within a second, that the client of a session blocked in a
 * lock wait is gone (PostgreSQL 14+, Linux; transaction-local; no row and no effect on
 * older servers). A waiter that gives up destroys its connection, but a session blocked
 * in `pg_advisory_lock` reads nothing from its socket: without this it waited on until
 * `lock_timeout` (the caller's whole `wait`), holding a server connection, so waiters
 * giving up could exhaust `max_connections`.
 */
export const NOTICE_GONE_CLIENT =
  "SELECT set_config(name, '1000', true) FROM pg_settings WHERE name = 'client_connection_check_interval'"

/**
 * The default mode: `pg_advisory_xact_lock` inside a transaction on a client borrowed
 * from the pool. The wait is one blocking call bounded by `SET LOCAL lock_timeout`, the
 * lock ends with the transaction (COMMIT after a successful critical section, ROLLBACK
 * after a failed one), and `resource` is that client, so the protected writes commit in
 * the same instant the lock is released. Nothing is held per session, so this stays
 * correct behind a transaction-mode pooler.
 */
export async function acquireTransactionLock(
  settings: PostgresSettings,
  tables: PostgresTables,
  request: AcquireRequest,
  flavor: TransactionLockFlavor = MUTEX,
): Promise<HeldLock<PgPoolClientLike> | undefined> {
  if (settings.fencing) await tables.ensure()
  const client = await borrowBounded('postgres', settings.pool.connect(), (late) => late.release(), settings.timeoutMs)
  const hold = new ConnectionHold(request.key)
  hold.watch(
    client,
    (cause) =>
      `the transaction's connection failed (${cause.message}); the lock is gone and the transaction rolled back`,
  )
  let returned = false
  const giveBack = () => {
    if (returned) return
    returned = true
    hold.stopWatching()
    client.release(hold.broken ?? undefined) // an Error destroys the connection instead of pooling it
  }
  const abandon = () => hold.markBroken(new Error('abandoned mid-statement'))
  const rollbackAndGiveBack = async () => {
    await boundedBackendCall('postgres', 'ROLLBACK', client.query('ROLLBACK'), settings.timeoutMs).catch(abandon)
    giveBack()
    return undefined
  }

  const key = advisoryKey(settings.keys, settings.namespace, flavor.advisoryText(request.key))
  const suffix = flavor.shared ? '_shared' : ''
  const lockSql =
    request.waitMs > 0
      ? `BEGIN; ${NOTICE_GONE_CLIENT}; SET LOCAL lock_timeout = ${request.waitMs}; ` +
        `SELECT pg_advisory_xact_lock${suffix}(${key.literal}); SET LOCAL lock_timeout TO DEFAULT`
      : `BEGIN; SELECT pg_try_advisory_xact_lock${suffix}(${key.literal}) AS got`
  try {
    let results: PgResult[]
    try {
      const call = abortable(client.query(lockSql), request.signal, abandon)
      results = asList(
        await boundedBackendCall(
          'postgres',
          'pg_advisory_xact_lock',
          call,
          request.waitMs + settings.timeoutMs,
          abandon,
        ),
      )
    } catch (err) {
      if (isLockTimeout(err)) return await rollbackAndGiveBack()
      throw err
    }
    if (request.waitMs === 0 && results[1]?.rows[0]?.got !== true) return await rollbackAndGiveBack()
    let token: bigint | undefined
    if (settings.fencing) {
      const issued = await boundedBackendCall(
        'postgres',
        'issuing the fencing token',
        client.query(...flavor.tokenQuery(tables, settings.namespace, request.key)),
        settings.timeoutMs,
        abandon,
      )
      token = BigInt(String(asList(issued)[0]?.rows[0]?.token))
    }
    return hold.heldLock('postgres', {
      token,
      resource: client,
      // Nothing to extend: the lock lasts as long as the transaction. No round trip either:
      // the client may be busy with the critical section's own statements.
      renew: async () => hold.held,
      release: (failure?: unknown) => endTransaction(client, hold, failure, settings.timeoutMs, giveBack),
    })
  } catch (err) {
    abandon()
    giveBack()
    if (request.signal.aborted) throw request.signal.reason
    throw asBackendError('postgres', 'taking the advisory lock', err)
  }
}

async function endTransaction(
  client: PgPoolClientLike,
  hold: ConnectionHold,
  failure: unknown,
  timeoutMs: number,
  giveBack: () => void,
): Promise<void> {
  const wasLost = hold.lost
  if (!hold.beginRelease()) return
  if (wasLost) {
    giveBack()
    if (failure !== undefined) return
    throw new LockBackendError(
      'postgres',
      `the connection was lost before COMMIT (${hold.broken?.message ?? 'unknown'}): the lock ended and nothing written in its transaction was kept`,
    )
  }
  const statement = failure === undefined ? 'COMMIT' : 'ROLLBACK'
  let result: PgResult
  try {
    result = asList(await boundedBackendCall('postgres', statement, client.query(statement), timeoutMs))[0]!
    // Ended from outside while fn may still run (Locks.close()): fn's next statements must
    // fail on a closed client, not run in autocommit on a client lent to someone else.
    if (failure instanceof LockLostError) hold.markBroken(failure)
  } catch (err) {
    hold.markBroken(err as Error)
    throw err
  } finally {
    giveBack()
  }
  // COMMIT of a transaction in which a statement failed is answered with ROLLBACK, not an error.
  if (statement === 'COMMIT' && result.command === 'ROLLBACK') {
    throw new LockBackendError(
      'postgres',
      'COMMIT rolled back: a statement in the critical section failed, so PostgreSQL aborted the transaction and kept nothing it wrote',
    )
  }
}

/** The lock wait ran out (`lock_timeout`): busy, not a failure. */
export function isLockTimeout(err: unknown): boolean {
  return (err as { cause?: { code?: string } }).cause?.code === LOCK_NOT_AVAILABLE
}

export function asList(result: PgResult | PgResult[]): PgResult[] {
  return Array.isArray(result) ? result : [result]
}
