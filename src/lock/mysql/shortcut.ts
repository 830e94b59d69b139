import type { BackendShortcut } from '../backend.js'
import { createMysqlBackend } from './backend.js'
import type { MysqlCallbackPoolLike, MysqlLockOptions, MysqlPoolLike } from './options.js'

/** `createLocks({ mysql: pool })` or `createLocks({ mysql: { connection: { host, user, … } } })`. */
export const mysqlShortcut: BackendShortcut<MysqlPoolLike | MysqlCallbackPoolLike | MysqlLockOptions> = {
  create(value, settings) {
    return createMysqlBackend(value as MysqlPoolLike | MysqlCallbackPoolLike | MysqlLockOptions, {
      namespace: settings.namespace,
    })
  },
}
