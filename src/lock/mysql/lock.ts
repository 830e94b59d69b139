import { LockBackendError } from '../../errors.js'
import type { AcquireRequest, HeldLock } from '../backend.js'
import { abortable, asBackendError, borrowBounded, boundedBackendCall } from '../backend-calls.js'
import { ConnectionHold } from '../connection-hold.js'
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
export async function acquireMysqlLock(
  settings: MysqlSettings,
  pool: MysqlPoolLike,
  tables: MysqlTables,
  request: AcquireRequest,
): Promise<HeldLock<undefined> | undefined> {
  if (settings.fencing) await tables.ensure(pool)
  const connection = await borrowBounded('mysql', pool.getConnection(), (late) => late.release(), settings.timeoutMs)
  const hold = new ConnectionHold(request.key)
  hold.watch(
    connection.connection,
    (cause) => `its connection failed (${cause.message}); the server released the GET_LOCK lock`,
  )
  let returned = false
  const giveBack = () => {
    if (returned) return
    returned = true
    hold.stopWatching()
    if (hold.broken) connection.destroy()
    else connection.release()
  }
  const abandon = () => {
    hold.markBroken(new Error('abandoned mid-statement'))
    giveBack()
  }

  const name = lockName(settings.namespace, request.key)
  try {
    const call = abortable(
      connection.query('SELECT IF(IS_USED_LOCK(?) = CONNECTION_ID(), -1, GET_LOCK(?, ?)) AS got', [
        name,
        name,
        request.waitMs / 1000,
      ]),
      request.signal,
      abandon,
    )
    const [rows] = await boundedBackendCall('mysql', 'GET_LOCK', call, request.waitMs + settings.timeoutMs, abandon)
    const got = Number((rows as { got: unknown }[])[0]?.got ?? Number.NaN)
    if (got === 0) {
      giveBack()
      return undefined
    }
    if (got === -1)
      throw new LockBackendError(
        'mysql',
        `a pooled connection came back still holding GET_LOCK('${name}'): an earlier borrower leaked it; that connection is destroyed`,
      )
    if (got !== 1) throw new LockBackendError('mysql', `GET_LOCK('${name}') answered NULL (the server failed the call)`)
    let token: bigint | undefined
    if (settings.fencing) {
      const [result] = await boundedBackendCall(
        'mysql',
        'issuing the fencing token',
        connection.query(nextTokenSql(tables.fences), [counterKey(settings.namespace, request.key)]),
        settings.timeoutMs,
        abandon,
      )
      const issued = (result as { insertId?: unknown }).insertId
      if (typeof issued !== 'number' || !Number.isSafeInteger(issued))
        throw new LockBackendError('mysql', `the fencing counter answered ${String(issued)}`)
      token = BigInt(issued)
    }
    return hold.heldLock('mysql', {
      token,
      resource: undefined,
      renew: () => confirmHeld(connection, hold, name, settings.timeoutMs, abandon),
      release: () => release(connection, hold, name, settings.timeoutMs, giveBack),
    })
  } catch (err) {
    abandon()
    if (request.signal.aborted) throw request.signal.reason
    throw asBackendError('mysql', 'taking the GET_LOCK lock', err)
  }
}

async function confirmHeld(
  connection: MysqlConnectionLike,
  hold: ConnectionHold,
  name: string,
  timeoutMs: number,
  abandon: () => void,
): Promise<boolean> {
  if (!hold.held) return false
  const [rows] = await boundedBackendCall(
    'mysql',
    'IS_USED_LOCK',
    connection.query('SELECT IS_USED_LOCK(?) = CONNECTION_ID() AS mine', [name]),
    timeoutMs,
    abandon,
  )
  if (Number((rows as { mine: unknown }[])[0]?.mine) !== 1) {
    hold.lose('the connection no longer holds the GET_LOCK lock')
    abandon()
  }
  return hold.held
}

async function release(
  connection: MysqlConnectionLike,
  hold: ConnectionHold,
  name: string,
  timeoutMs: number,
  giveBack: () => void,
): Promise<void> {
  const wasLost = hold.lost
  if (!hold.beginRelease()) return
  if (wasLost) return giveBack()
  try {
    const [rows] = await boundedBackendCall(
      'mysql',
      'RELEASE_LOCK',
      connection.query('SELECT RELEASE_LOCK(?) AS released', [name]),
      timeoutMs,
    )
    const released = Number((rows as { released: unknown }[])[0]?.released)
    if (released !== 1)
      throw new LockBackendError(
        'mysql',
        `RELEASE_LOCK('${name}') found the lock not held by this connection (answered ${released}); the connection is destroyed`,
      )
  } catch (err) {
    // Destroying the connection ends its session, and with it any lock left on it.
    hold.markBroken(err as Error)
    throw err
  } finally {
    giveBack()
  }
}
