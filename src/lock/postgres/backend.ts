import type { AcquireRequest, HeldLock, LockBackend } from '../backend.js'
import { postgresClaims } from './claims.js'
import { parsePostgresOptions, type PgPoolClientLike, type PgPoolLike, type PostgresLockOptions } from './options.js'
import { postgresTables } from './schema.js'
import { acquireSessionLock } from './session-lock.js'
import { acquireTransactionLock } from './transaction-lock.js'
import { PostgresSemaphores } from '../semaphore/postgres/store.js'
import { postgresReadWrite } from '../read-write/postgres.js'

/**
 * `createLocks({ postgres: pool })`: PostgreSQL advisory locks through the application's
 * `pg` Pool, plus ShedLock-style run-once claims. `resource` is the transaction's client
 * in the default mode (`undefined` in session mode). Both modes report `liveness:
 * 'session'`: the lock lasts as long as its transaction or connection, with no lease to
 * renew, and the front runs no watchdog.
 */
export function createPostgresBackend(
  input: PgPoolLike | PostgresLockOptions,
  defaults: { namespace?: string } = {},
): LockBackend<PgPoolClientLike | undefined> {
  const settings = parsePostgresOptions(input, defaults)
  const tables = postgresTables(settings)
  let warned = false
  const warnOnce = (message: string) => {
    if (warned) return
    warned = true
    process.emitWarning(message, { code: 'SG_PG_SESSION_BEHIND_PROXY' })
  }
  const semaphores = new PostgresSemaphores(settings)
  return {
    name: 'postgres',
    claims: postgresClaims(settings, tables),
    semaphores,
    // Transaction mode only: a session-mode hold would pin a connection per reader outside any transaction.
    readWrite: settings.mode === 'transaction' ? postgresReadWrite(settings, tables) : undefined,
    acquire(request: AcquireRequest): Promise<HeldLock<PgPoolClientLike | undefined> | undefined> {
      return settings.mode === 'session'
        ? acquireSessionLock(settings, tables, request, warnOnce)
        : acquireTransactionLock(settings, tables, request)
    },
    // Every connection is the caller's pool's or closed with its hold; the semaphores' listener goes back to it.
    async close() {
      semaphores.close()
    },
  }
}

export type { PostgresLockOptions } from './options.js'
export type { PostgresKeyMapping } from './keys.js'
