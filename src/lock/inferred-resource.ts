import type { LockBackend } from './backend.js'
import type { EtcdClientLike } from './etcd/client-like.js'
import type { EtcdFencedWrites } from './etcd/held-lock.js'
import type { LockDefaults } from './options.js'
import type { MysqlCallbackPoolLike, MysqlLockOptions, MysqlPoolLike } from './mysql/options.js'
import type { PgPoolClientLike, PgPoolLike, PostgresLockOptions } from './postgres/options.js'
import type { RedisLockOptions } from './redis/options.js'
import type { RedlockOptions } from './redlock/shortcut.js'
import type { StoreOptions } from './resolve-backend.js'
import type { ZooKeeperClientLike } from './zookeeper/client-like.js'
import type { ZooKeeperFencedWrites } from './zookeeper/held-lock.js'
import type { RedisClientLike } from '../redis-client.js'

/**
 * What `createLocks`'s overloads infer `resource` (the value `withLock` hands `fn`, and
 * `lock.resource`) from: the backend option. `redis`, `redlock`, `mysql` and session-mode
 * `postgres`: nothing to hand over. `postgres` in transaction mode (the default): your pool's
 * own client type (`pg.PoolClient` for a `pg.Pool`), the transaction the lock lives in.
 * `etcd` and `zookeeper`: owner-checked writes. `backend`: that backend's resource.
 */

/** The options every backend shares. */
export type CommonLockOptions = LockDefaults & StoreOptions

/** The client a pool's `connect()` resolves to; `pg.Pool` declares a callback overload after the promise one. */
export type PoolClientOf<Pool> = Pool extends { connect(): Promise<infer Client>; connect(callback: never): void }
  ? Client
  : Pool extends { connect(): Promise<infer Client> }
    ? Client
    : PgPoolClientLike

/** `postgres: { pool, … }` in transaction mode (the default). */
export type PostgresTransactionOptions<Pool extends PgPoolLike> = Omit<PostgresLockOptions, 'pool' | 'mode'> & {
  pool: Pool
  mode?: 'transaction'
}

export type PostgresLocksOptions<Pool extends PgPoolLike> = CommonLockOptions & {
  postgres: Pool | PostgresTransactionOptions<Pool>
}
export type PostgresSessionLocksOptions = CommonLockOptions & { postgres: PostgresLockOptions & { mode: 'session' } }
export type MysqlLocksOptions = CommonLockOptions & { mysql: MysqlPoolLike | MysqlCallbackPoolLike | MysqlLockOptions }
export type RedisLocksOptions = CommonLockOptions & { redis: RedisClientLike | RedisLockOptions }
export type RedlockLocksOptions = CommonLockOptions & { redlock: readonly RedisClientLike[] | RedlockOptions }
export type EtcdLocksOptions = CommonLockOptions & { etcd: EtcdClientLike }
export type ZooKeeperLocksOptions = CommonLockOptions & { zookeeper: ZooKeeperClientLike }
export type BackendLocksOptions<Resource> = CommonLockOptions & { backend: LockBackend<Resource> }

export type { EtcdFencedWrites, ZooKeeperFencedWrites }
