import type { RedisClientLike } from '../redis-client.js'
import { parseDuration, type Duration } from '../duration.js'
import { InvalidArgumentError } from '../errors.js'
import type { LockBackend } from './backend.js'
import { orDefault } from './options.js'
import { redisShortcut } from './redis/shortcut.js'
import type { RedisLockOptions } from './redis/options.js'
import { redlockShortcut, type RedlockOptions } from './redlock/shortcut.js'
import type { EtcdClientLike } from './etcd/client-like.js'
import { etcdShortcut } from './etcd/shortcut.js'
import type { ZooKeeperClientLike } from './zookeeper/client-like.js'
import { zookeeperShortcut } from './zookeeper/shortcut.js'
import { postgresShortcut } from './postgres/shortcut.js'
import type { PgPoolLike, PostgresLockOptions } from './postgres/options.js'
import { mysqlShortcut } from './mysql/shortcut.js'
import type { MysqlCallbackPoolLike, MysqlLockOptions, MysqlPoolLike } from './mysql/options.js'

/**
 * The backend shortcuts `createLocks` accepts: one field per backend, and exactly one of
 * them (or `backend`) per call. The user passes a client they created; a backend never
 * imports its peer package at load time.
 */
export interface BackendShortcuts {
  /**
   * An ioredis client (standalone, Sentinel) or Cluster, or `{ client, shardedPubSub,
   * waitForReplicas }`: the Redis backend (fenced tokens, pub/sub wake-up; sharded pub/sub
   * on a Redis ≥ 7 Cluster by default).
   */
  redis?: RedisClientLike | RedisLockOptions
  /** Independent Redis masters (not replicas), or `{ nodes, nodeTimeout }`: the Redlock backend. No fencing token. */
  redlock?: readonly RedisClientLike[] | RedlockOptions
  /** An etcd3 client (`new Etcd3({ hosts })`): the etcd backend (FIFO, token = create_revision, owner-checked writes as `resource`). */
  etcd?: EtcdClientLike
  /** A connected node-zookeeper-client `Client`: the ZooKeeper backend (FIFO, token = the node's czxid). */
  zookeeper?: ZooKeeperClientLike
  /**
   * A `pg` Pool, or `{ pool, mode, keys, schema, fencing, timeout }`: PostgreSQL advisory
   * locks (transaction-scoped by default, `resource` = the transaction's client; token from
   * a counter table). Run-once claims in a table.
   */
  postgres?: PgPoolLike | PostgresLockOptions
  /** A mysql2 pool, or `{ pool | connection, database, fencing, timeout }`: MariaDB/MySQL GET_LOCK on a dedicated connection; token from a counter table. */
  mysql?: MysqlPoolLike | MysqlCallbackPoolLike | MysqlLockOptions
}

/** Options each store-backed shortcut understands. */
export interface StoreOptions {
  /** Prefix of every name a backend creates in its store. Default `'sg-lock'`. */
  namespace?: string
  /** Bound on each call to the store, in ms or `'1s'`; a call past it fails with the backend's typed error. Default `'1s'`. */
  commandTimeout?: Duration
}

export interface StoreSettings {
  namespace: string
  commandTimeoutMs: number
}

/** One shortcut: the option that selects it, and how it builds its backend from the option's value. */
export interface BackendShortcut {
  readonly option: keyof BackendShortcuts
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the shortcut's resource type is erased here
  create(value: unknown, settings: StoreSettings): LockBackend<any>
}

/** Add a backend: one entry here, one field in `BackendShortcuts`. */
const SHORTCUTS: readonly BackendShortcut[] = [
  redisShortcut,
  redlockShortcut,
  etcdShortcut,
  zookeeperShortcut,
  postgresShortcut,
  mysqlShortcut,
]

export const SHORTCUT_OPTIONS: readonly string[] = SHORTCUTS.map((shortcut) => shortcut.option)

export function resolveBackend(
  options: BackendShortcuts & StoreOptions & { backend?: LockBackend<unknown> },
): LockBackend<unknown> {
  const given = [
    ...(options.backend === undefined ? [] : ['backend']),
    ...SHORTCUTS.filter((s) => options[s.option] !== undefined).map((s) => s.option),
  ]
  if (given.length !== 1) {
    throw new InvalidArgumentError(
      'backend',
      `give exactly one of ${['backend', ...SHORTCUT_OPTIONS].join(', ')}; got ${given.length === 0 ? 'none' : given.join(' and ')}`,
    )
  }
  const namespace = orDefault(options.namespace, 'sg-lock')
  if (typeof namespace !== 'string' || namespace.length === 0)
    throw new InvalidArgumentError('namespace', 'must be a non-empty string')
  const settings: StoreSettings = {
    namespace,
    commandTimeoutMs: parseDuration('commandTimeout', orDefault(options.commandTimeout, 1_000)),
  }
  if (options.backend !== undefined) {
    const { backend } = options
    if (
      typeof backend !== 'object' ||
      backend === null ||
      typeof backend.acquire !== 'function' ||
      typeof backend.close !== 'function'
    ) {
      throw new InvalidArgumentError('backend', 'expected a LockBackend (name, acquire, close)')
    }
    return backend
  }
  const shortcut = SHORTCUTS.find((s) => s.option === given[0])!
  return shortcut.create(options[shortcut.option], settings)
}
