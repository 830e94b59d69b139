import { LockBackendError } from '../../errors.js'
import type { AcquireRequest, HeldLock } from '../backend.js'
import { abortable, asBackendError, boundedBackendCall } from '../backend-calls.js'
import { ConnectionHold } from '../connection-hold.js'
import { advisoryKey, type AdvisoryKey } from './keys.js'
import type { PgStandaloneClientLike, PostgresSettings } from './options.js'
import { nextTokenSql, type PostgresTables } from './schema.js'
import { asList, isLockTimeout, NOTICE_GONE_CLIENT } from './transaction-lock.js'

/**
 * Opt-in session mode: `pg_advisory_lock` on a connection opened for this hold alone
 * (with the pool's Client class and settings, so it never pins a pool slot and is never
 * handed to anyone else), unlocked on that same connection, then closed. Losing the
 * connection ends the lock server-side and aborts `signal`.
 *
 * Behind a transaction-mode pooler (PgBouncer) one client connection does not own one
 * server session, so a session lock can stay behind on a server session the pooler
 * hands to the next client (who then "gets" the same lock: session locks stack), or be
 * unlocked on the wrong one. The backend refuses when it sees that: the session already
 * holds advisory locks it did not take, or the server pid changes between statements.
 */
export async function acquireSessionLock(
  settings: PostgresSettings,
  tables: PostgresTables,
  request: AcquireRequest,
  warnOnce: (message: string) => void,
): Promise<HeldLock<undefined> | undefined> {
  if (settings.fencing) await tables.ensure()
  const { pool } = settings
  const client = new pool.Client!(pool.options)
  const hold = new ConnectionHold(request.key)
  hold.watch(
    client,
    (cause) => `its dedicated connection failed (${cause.message}); PostgreSQL released the session lock`,
  )
  let closed = false
  const close = () => {
    if (closed) return
    closed = true
    hold.markBroken(new Error('closed'))
    closeQuietly(client, settings.timeoutMs)
  }

  const key = advisoryKey(settings.keys, settings.namespace, request.key)
  try {
    await boundedBackendCall('postgres', 'connect', client.connect(), settings.timeoutMs, close)
    const session = await inspectSession(client, settings.timeoutMs, close)
    refuseSharedSession(session, clientPort(pool.options), warnOnce)
    const locked = await takeAdvisoryLock(client, key, request, settings.timeoutMs, close)
    if (locked === undefined) {
      close()
      return undefined
    }
    samePid(session.pid, locked.pid)
    const token = settings.fencing
      ? await issueToken(client, tables, settings, request.key, session.pid, close)
      : undefined
    return hold.heldLock('postgres', {
      token,
      resource: undefined,
      renew: () => confirmHeld(client, hold, key, session.pid, settings.timeoutMs, close),
      release: () => unlock(client, hold, key, session.pid, settings.timeoutMs, close),
    })
  } catch (err) {
    close()
    if (request.signal.aborted) throw request.signal.reason
    throw asBackendError('postgres', 'taking the session advisory lock', err)
  }
}

/**
 * Refuses a session that already holds advisory locks it did not take (a transaction-mode
 * pooler sharing server sessions, or a leaked lock), and warns once when a proxy or pooler
 * sits between the pool and the server.
 */
function refuseSharedSession(session: SessionFacts, configuredPort: number, warnOnce: (message: string) => void) {
  if (session.advisoryLocks > 0) {
    throw new LockBackendError(
      'postgres',
      `session mode refused: this connection's server session already holds ${session.advisoryLocks} advisory lock(s) it did not take. ` +
        'A transaction-mode pooler (PgBouncer) is sharing server sessions between clients, or another library leaked a session lock; ' +
        "session locks are not safe there. Use the default mode: 'transaction'",
    )
  }
  if (session.serverPort !== null && session.serverPort !== configuredPort) {
    warnOnce(
      `stampede-guard: postgres session locks: the server listens on port ${session.serverPort} ` +
        `but the pool connects to ${configuredPort}, so a proxy or pooler sits in between. ` +
        'Session advisory locks are unsafe behind a transaction-mode pooler (PgBouncer pool_mode=transaction); ' +
        "use mode: 'transaction' unless it runs in session mode.",
    )
  }
}

/**
 * Takes the advisory lock on `client`, waiting up to `request.waitMs` (`lock_timeout`), or
 * one try when it is 0. Resolves with the backend pid that took it, or `undefined` when busy.
 */
async function takeAdvisoryLock(
  client: PgStandaloneClientLike,
  key: AdvisoryKey,
  request: AcquireRequest,
  timeoutMs: number,
  close: () => void,
): Promise<{ pid: unknown } | undefined> {
  const waits = request.waitMs > 0
  const lockSql = waits
    ? `BEGIN; ${NOTICE_GONE_CLIENT}; SET LOCAL lock_timeout = ${request.waitMs}; SELECT pg_advisory_lock(${key.literal}), pg_backend_pid() AS pid; COMMIT`
    : `SELECT pg_try_advisory_lock(${key.literal}) AS got, pg_backend_pid() AS pid`
  let row: Record<string, unknown> | undefined
  try {
    const call = abortable(client.query(lockSql), request.signal, close)
    const results = asList(
      await boundedBackendCall('postgres', 'pg_advisory_lock', call, request.waitMs + timeoutMs, close),
    )
    row = waits ? results[3]?.rows[0] : results[0]?.rows[0]
  } catch (err) {
    if (isLockTimeout(err)) return undefined
    throw err
  }
  if (!waits && row?.got !== true) return undefined
  return { pid: row?.pid }
}

/** The next fencing token for `key`, issued on the lock's own session (its pid checked). */
async function issueToken(
  client: PgStandaloneClientLike,
  tables: PostgresTables,
  settings: PostgresSettings,
  key: string,
  pid: number,
  close: () => void,
): Promise<bigint> {
  const issued = asList(
    await boundedBackendCall(
      'postgres',
      'issuing the fencing token',
      client.query(nextTokenSql(tables.fences), [settings.namespace, key]),
      settings.timeoutMs,
      close,
    ),
  )
  samePid(pid, issued[0]?.rows[0]?.pid)
  return BigInt(String(issued[0]?.rows[0]?.token))
}

interface SessionFacts {
  pid: number
  serverPort: number | null
  advisoryLocks: number
}

async function inspectSession(
  client: PgStandaloneClientLike,
  timeoutMs: number,
  close: () => void,
): Promise<SessionFacts> {
  const sql =
    'SELECT pg_backend_pid() AS pid, inet_server_port() AS port, ' +
    "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())::int AS held"
  const row =
    asList(await boundedBackendCall('postgres', 'inspecting the session', client.query(sql), timeoutMs, close))[0]
      ?.rows[0] ?? {}
  return {
    pid: Number(row.pid),
    serverPort: row.port === null || row.port === undefined ? null : Number(row.port),
    advisoryLocks: Number(row.held),
  }
}

function samePid(expected: number, actual: unknown): void {
  if (Number(actual) !== expected) {
    throw new LockBackendError(
      'postgres',
      `session mode refused: the server session changed between two statements on one connection (pid ${expected}, then ${String(actual)}): ` +
        "a transaction-mode pooler sits in between, so a session lock would not stay with this connection. Use mode: 'transaction'",
    )
  }
}

async function confirmHeld(
  client: PgStandaloneClientLike,
  hold: ConnectionHold,
  key: AdvisoryKey,
  pid: number,
  timeoutMs: number,
  close: () => void,
): Promise<boolean> {
  if (!hold.held) return false
  const { classid, objid, objsubid } = key.locksFilter
  const sql =
    "SELECT pg_backend_pid() AS pid, EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted " +
    'AND pid = pg_backend_pid() AND classid = $1 AND objid = $2 AND objsubid = $3) AS held'
  const row = asList(
    await boundedBackendCall(
      'postgres',
      'checking the session lock',
      client.query(sql, [classid, objid, objsubid]),
      timeoutMs,
      close,
    ),
  )[0]?.rows[0]
  if (Number(row?.pid) !== pid || row?.held !== true) {
    hold.lose('the session no longer holds the advisory lock')
    close()
    return false
  }
  return hold.held
}

async function unlock(
  client: PgStandaloneClientLike,
  hold: ConnectionHold,
  key: AdvisoryKey,
  pid: number,
  timeoutMs: number,
  close: () => void,
): Promise<void> {
  const wasLost = hold.lost
  if (!hold.beginRelease()) return
  if (wasLost) return close()
  try {
    const row = asList(
      await boundedBackendCall(
        'postgres',
        'pg_advisory_unlock',
        client.query(`SELECT pg_advisory_unlock(${key.literal}) AS ok, pg_backend_pid() AS pid`),
        timeoutMs,
        close,
      ),
    )[0]?.rows[0]
    if (row?.ok !== true || Number(row.pid) !== pid) {
      throw new LockBackendError(
        'postgres',
        `pg_advisory_unlock found no such lock on session ${String(row?.pid)} (taken on ${pid}); ` +
          'the connection is closed, which ends every lock of its session',
      )
    }
  } finally {
    // Closing ends the session, so even a failed unlock frees the lock on a direct connection.
    close()
  }
}

function closeQuietly(client: PgStandaloneClientLike, timeoutMs: number): void {
  boundedBackendCall('postgres', 'closing the connection', client.end(), timeoutMs).catch(() => {})
}

/** The port the pool's clients connect to, as pg resolves it: `port`, the connection string's, PGPORT, 5432. */
function clientPort(options: { port?: number; connectionString?: string } | undefined): number {
  if (options?.port !== undefined) return Number(options.port)
  if (options?.connectionString) {
    try {
      const port = new URL(options.connectionString).port
      if (port) return Number(port)
    } catch {
      /* not a URL: pg's other forms fall through */
    }
  }
  return Number(process.env.PGPORT ?? 5432)
}
