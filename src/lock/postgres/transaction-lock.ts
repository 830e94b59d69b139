import { LockBackendError } from '../../errors.js'
import type { AcquireRequest, HeldLock } from '../backend.js'
import { abortable, asBackendError, boundedCall, ConnectionHold } from '../connection-hold.js'
import { advisoryKey } from './keys.js'
import type { PgPoolClientLike, PgPoolLike, PgResult, PostgresSettings } from './options.js'
import { nextTokenSql, type PostgresTables } from './schema.js'

/** SQLSTATE 55P03 lock_not_available: `lock_timeout` ran out while waiting. */
const LOCK_NOT_AVAILABLE = '55P03'

/**
 * The default mode: `pg_advisory_xact_lock` inside a transaction on a client borrowed
 * from the pool. The wait is one blocking call bounded by `SET LOCAL lock_timeout`, the
 * lock ends with the transaction (COMMIT after a successful critical section, ROLLBACK
 * after a failed one), and `resource` is that client, so the protected writes commit in
 * the same instant the lock is released. Nothing is held per session, so this stays
 * correct behind a transaction-mode pooler.
 */
export async function acquireTransactionLock(settings: PostgresSettings, tables: PostgresTables, request: AcquireRequest): Promise<HeldLock<PgPoolClientLike> | undefined> {
  if (settings.fencing) await tables.ensure()
  const client = await connectPooled(settings.pool, settings.timeoutMs)
  const hold = new ConnectionHold(request.key)
  let broken: Error | undefined
  const onError = (err?: Error) => {
    broken ??= err ?? new Error('connection ended')
    hold.lose(`the transaction's connection failed (${broken.message}); the lock is gone and the transaction rolled back`)
  }
  const onEnd = () => onError(new Error('connection ended'))
  client.on('error', onError)
  client.on('end', onEnd)
  const giveBack = (destroy: boolean) => {
    client.removeListener('error', onError)
    client.removeListener('end', onEnd)
    client.release(destroy ? (broken ?? true) : undefined)
  }
  const destroy = () => {
    broken ??= new Error('abandoned')
  }

  const key = advisoryKey(settings.keys, settings.namespace, request.key)
  const lockSql =
    request.waitMs > 0
      ? `BEGIN; SET LOCAL lock_timeout = ${request.waitMs}; SELECT pg_advisory_xact_lock(${key.literal}); SET LOCAL lock_timeout TO DEFAULT`
      : `BEGIN; SELECT pg_try_advisory_xact_lock(${key.literal}) AS got`
  try {
    let results: PgResult[]
    try {
      const call = abortable(client.query(lockSql), request.signal, destroy)
      results = asList(await boundedCall('postgres', 'pg_advisory_xact_lock', call, request.waitMs + settings.timeoutMs, destroy))
    } catch (err) {
      if ((err as { cause?: { code?: string } }).cause?.code === LOCK_NOT_AVAILABLE) {
        await rollback(client, settings.timeoutMs).then(
          () => giveBack(false),
          () => giveBack(true),
        )
        return undefined
      }
      throw err
    }
    if (request.waitMs === 0 && results[1]?.rows[0]?.got !== true) {
      await rollback(client, settings.timeoutMs).then(
        () => giveBack(false),
        () => giveBack(true),
      )
      return undefined
    }
    let token: bigint | undefined
    if (settings.fencing) {
      const issued = await boundedCall('postgres', 'issuing the fencing token', client.query(nextTokenSql(tables.fences), [settings.namespace, request.key]), settings.timeoutMs, destroy)
      token = BigInt(String(asList(issued)[0]?.rows[0]?.token))
    }
    if (!hold.held) throw new LockBackendError('postgres', `the connection failed while taking the lock: ${broken?.message ?? 'unknown'}`)
    return {
      token,
      liveness: 'session',
      signal: hold.signal,
      resource: client,
      // Nothing to extend: the lock lasts as long as the transaction. No round trip either:
      // the client may be busy with the critical section's own statements.
      renew: async () => hold.held,
      release: (failure?: unknown) => endTransaction(client, hold, failure, settings.timeoutMs, giveBack, () => broken),
    }
  } catch (err) {
    destroy()
    giveBack(true)
    if (request.signal.aborted) throw request.signal.reason
    throw asBackendError('postgres', 'taking the advisory lock', err)
  }
}

async function endTransaction(
  client: PgPoolClientLike,
  hold: ConnectionHold,
  failure: unknown,
  timeoutMs: number,
  giveBack: (destroy: boolean) => void,
  broken: () => Error | undefined,
): Promise<void> {
  const wasLost = hold.lost
  if (!hold.beginRelease()) return
  if (wasLost) {
    giveBack(true)
    if (failure !== undefined) return
    throw new LockBackendError('postgres', `the connection was lost before COMMIT (${broken()?.message ?? 'unknown'}): the lock ended and nothing written in its transaction was kept`)
  }
  const statement = failure === undefined ? 'COMMIT' : 'ROLLBACK'
  let result: PgResult
  try {
    result = asList(await boundedCall('postgres', statement, client.query(statement), timeoutMs))[0]!
  } catch (err) {
    giveBack(true)
    throw err
  }
  giveBack(false)
  // COMMIT of a transaction in which a statement failed is answered with ROLLBACK, not an error.
  if (statement === 'COMMIT' && result.command === 'ROLLBACK') {
    throw new LockBackendError('postgres', 'COMMIT rolled back: a statement in the critical section failed, so PostgreSQL aborted the transaction and kept nothing it wrote')
  }
}

async function rollback(client: PgPoolClientLike, timeoutMs: number): Promise<void> {
  await boundedCall('postgres', 'ROLLBACK', client.query('ROLLBACK'), timeoutMs)
}

/** `pool.connect()` bounded; a client that arrives after the bound is given straight back. */
export async function connectPooled(pool: PgPoolLike, timeoutMs: number): Promise<PgPoolClientLike> {
  let late = false
  const connecting = pool.connect()
  connecting.then(
    (client) => {
      if (late) client.release()
    },
    () => {},
  )
  return boundedCall('postgres', 'connect', connecting, timeoutMs, () => (late = true))
}

export function asList(result: PgResult | PgResult[]): PgResult[] {
  return Array.isArray(result) ? result : [result]
}
