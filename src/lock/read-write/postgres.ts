import type { AcquireRequest, HeldLock, LockBackend } from '../backend.js'
import type { PostgresSettings } from '../postgres/options.js'
import type { PostgresTables } from '../postgres/schema.js'
import { acquireTransactionLock, type TransactionLockFlavor } from '../postgres/transaction-lock.js'
import type { ReadWriteStore } from './store.js'

/** The advisory key's text: apart from the mutex on the same name (which hashes the name alone). */
const advisoryText = (name: string) => `\u0000rw\u0000${name}`
/** One sequence for every read-write name: `nextval` holds no lock, so readers never take turns for a token. */
const tokenQuery = (tables: PostgresTables): [string, unknown[]] => [
  `SELECT nextval('${tables.rwTokens}') AS token`,
  [],
]

/**
 * Read-write locks on PostgreSQL (transaction mode): readers take
 * `pg_advisory_xact_lock_shared`, the writer `pg_advisory_xact_lock`, on one advisory key
 * per name, each in its own transaction on a client borrowed from the pool, like the mutex
 * (`resource` is that client; COMMIT or ROLLBACK ends the hold). Liveness is the
 * connection: a reader whose process dies is dropped when the server sees its socket close.
 *
 * Writers first, by the server's lock manager: a shared request that conflicts with a
 * request already *waiting* in the lock's queue waits behind it (and a `pg_try_…` one
 * fails), so once a writer waits no new reader gets in; the readers inside finish and the
 * writer is granted next.
 * @internal
 */
export function postgresReadWrite(settings: PostgresSettings, tables: PostgresTables): ReadWriteStore {
  const side = (shared: boolean): LockBackend<unknown> => {
    const flavor: TransactionLockFlavor = { shared, advisoryText, tokenQuery }
    return {
      name: 'postgres',
      acquire: (request: AcquireRequest): Promise<HeldLock<unknown> | undefined> =>
        acquireTransactionLock(settings, tables, request, flavor),
      async close() {},
    }
  }
  return { readers: side(true), writers: side(false), close: async () => {} }
}
