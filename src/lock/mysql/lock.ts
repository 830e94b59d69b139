import { LockBackendError } from '../../errors.js'
import type { AcquireRequest, HeldLock } from '../backend.js'
import { abortable, asBackendError, boundedCall, ConnectionHold } from '../connection-hold.js'
import { counterKey, lockName } from './names.js'
import type { MysqlConnectionLike, MysqlPoolLike, MysqlSettings } from './options.js'
import { nextTokenSql, type MysqlTables } from './tables.js'

/**
 * `GET_LOCK(name, timeout)` on a connection borrowed from the pool for the whole hold,
 * and `RELEASE_LOCK` on that same connection before it goes back. The wait is the
 * server's own (no polling). The lock lives as long as the connection: when it breaks,
 * the server drops the lock and `signal` aborts.
 *
 * GET_LOCK locks stack per connection, so a connection that comes back from the pool
 * still holding our name (an earlier borrower that leaked it) must not "take" it again:
 * the acquire statement answers -1 then, and that connection is destroyed.
 */
export async function acquireMysqlLock(settings: MysqlSettings, pool: MysqlPoolLike, tables: MysqlTables, request: AcquireRequest): Promise<HeldLock<undefined> | undefined> {
  if (settings.fencing) await tables.ensure(pool)
  const connection = await borrow(pool, settings.timeoutMs)
  const hold = new ConnectionHold(request.key)
  let broken: Error | undefined
  const onError = (err?: Error) => {
    broken ??= err ?? new Error('connection ended')
    hold.lose(`its connection failed (${broken.message}); the server released the GET_LOCK lock`)
  }
  const onEnd = () => onError(new Error('connection ended'))
  connection.connection.on('error', onError)
  connection.connection.on('end', onEnd)
  let returned = false
  const giveBack = (destroy: boolean) => {
    if (returned) return
    returned = true
    connection.connection.removeListener('error', onError)
    connection.connection.removeListener('end', onEnd)
    if (destroy || broken) connection.destroy()
    else connection.release()
  }
  const abandon = () => {
    broken ??= new Error('abandoned')
    giveBack(true)
  }

  const name = lockName(settings.namespace, request.key)
  try {
    const call = abortable(connection.query('SELECT IF(IS_USED_LOCK(?) = CONNECTION_ID(), -1, GET_LOCK(?, ?)) AS got', [name, name, request.waitMs / 1000]), request.signal, abandon)
    const [rows] = await boundedCall('mysql', 'GET_LOCK', call, request.waitMs + settings.timeoutMs, abandon)
    const got = Number((rows as { got: unknown }[])[0]?.got ?? Number.NaN)
    if (got === 0) {
      giveBack(false)
      return undefined
    }
    if (got === -1) throw new LockBackendError('mysql', `a pooled connection came back still holding GET_LOCK('${name}'): an earlier borrower leaked it; that connection is destroyed`)
    if (got !== 1) throw new LockBackendError('mysql', `GET_LOCK('${name}') answered NULL (the server failed the call)`)
    let token: bigint | undefined
    if (settings.fencing) {
      const [result] = await boundedCall('mysql', 'issuing the fencing token', connection.query(nextTokenSql(tables.fences), [counterKey(settings.namespace, request.key)]), settings.timeoutMs, abandon)
      const issued = (result as { insertId?: unknown }).insertId
      if (typeof issued !== 'number' || !Number.isSafeInteger(issued)) throw new LockBackendError('mysql', `the fencing counter answered ${String(issued)}`)
      token = BigInt(issued)
    }
    if (!hold.held) throw new LockBackendError('mysql', `the connection failed while taking the lock: ${broken?.message ?? 'unknown'}`)
    return {
      token,
      liveness: 'session',
      signal: hold.signal,
      resource: undefined,
      renew: () => confirmHeld(connection, hold, name, settings.timeoutMs, abandon),
      release: () => release(connection, hold, name, settings.timeoutMs, giveBack),
    }
  } catch (err) {
    abandon()
    if (request.signal.aborted) throw request.signal.reason
    throw asBackendError('mysql', 'taking the GET_LOCK lock', err)
  }
}

async function confirmHeld(connection: MysqlConnectionLike, hold: ConnectionHold, name: string, timeoutMs: number, abandon: () => void): Promise<boolean> {
  if (!hold.held) return false
  const [rows] = await boundedCall('mysql', 'IS_USED_LOCK', connection.query('SELECT IS_USED_LOCK(?) = CONNECTION_ID() AS mine', [name]), timeoutMs, abandon)
  if (Number((rows as { mine: unknown }[])[0]?.mine) !== 1) {
    hold.lose('the connection no longer holds the GET_LOCK lock')
    abandon()
  }
  return hold.held
}

async function release(connection: MysqlConnectionLike, hold: ConnectionHold, name: string, timeoutMs: number, giveBack: (destroy: boolean) => void): Promise<void> {
  const wasLost = hold.lost
  if (!hold.beginRelease()) return
  if (wasLost) return giveBack(true)
  let released: number
  try {
    const [rows] = await boundedCall('mysql', 'RELEASE_LOCK', connection.query('SELECT RELEASE_LOCK(?) AS released', [name]), timeoutMs)
    released = Number((rows as { released: unknown }[])[0]?.released)
  } catch (err) {
    // Destroying the connection ends its session, and with it the lock.
    giveBack(true)
    throw err
  }
  if (released !== 1) {
    giveBack(true)
    throw new LockBackendError('mysql', `RELEASE_LOCK('${name}') found the lock not held by this connection (answered ${released}); the connection is destroyed`)
  }
  giveBack(false)
}

/** `pool.getConnection()` bounded; a connection that arrives after the bound is released. */
async function borrow(pool: MysqlPoolLike, timeoutMs: number): Promise<MysqlConnectionLike> {
  let late = false
  const borrowing = pool.getConnection()
  borrowing.then(
    (connection) => {
      if (late) connection.release()
    },
    () => {},
  )
  return boundedCall('mysql', 'getConnection', borrowing, timeoutMs, () => (late = true))
}
