import type { BackendShortcut } from '../backend.js'
import { createPostgresBackend } from './backend.js'
import type { PgPoolLike, PostgresLockOptions } from './options.js'

/** `createLocks({ postgres: pool })` or `createLocks({ postgres: { pool, mode: 'session', … } })`. */
export const postgresShortcut: BackendShortcut<PgPoolLike | PostgresLockOptions> = {
  create(value, settings) {
    return createPostgresBackend(value as PgPoolLike | PostgresLockOptions, { namespace: settings.namespace })
  },
}
