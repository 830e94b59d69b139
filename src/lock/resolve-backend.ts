import { parseDuration, type Duration } from '../duration.js'
import { InvalidArgumentError } from '../errors.js'
import type { BackendShortcut, LockBackend, StoreSettings } from './backend.js'
import { orDefault } from './options.js'
import { redisShortcut } from './redis/shortcut.js'
import { redlockShortcut } from './redlock/shortcut.js'
import { etcdShortcut } from './etcd/shortcut.js'
import { zookeeperShortcut } from './zookeeper/shortcut.js'
import { postgresShortcut } from './postgres/shortcut.js'
import { mysqlShortcut } from './mysql/shortcut.js'

/**
 * The backend shortcuts `createLocks` accepts, one per backend: the key is the option, the
 * value builds the backend from the client the caller created (a backend never imports its
 * peer package at load time). Adding a backend is one entry here: `BackendShortcuts`, the
 * option checks and the error that lists the choices all follow from this object.
 */
const SHORTCUTS = {
  /**
   * An ioredis client (standalone, Sentinel) or Cluster, or `{ client, shardedPubSub,
   * waitForReplicas }`: the Redis backend (fenced tokens, pub/sub wake-up; sharded pub/sub
   * on a Redis ≥ 7 Cluster by default).
   */
  redis: redisShortcut,
  /** Independent Redis masters (not replicas), or `{ nodes, nodeTimeout }`: the Redlock backend. No fencing token. */
  redlock: redlockShortcut,
  /** An etcd3 client (`new Etcd3({ hosts })`): the etcd backend (FIFO, token = create_revision, owner-checked writes as `resource`). */
  etcd: etcdShortcut,
  /** A connected node-zookeeper-client `Client`: the ZooKeeper backend (FIFO, token = the node's czxid). */
  zookeeper: zookeeperShortcut,
  /**
   * A `pg` Pool, or `{ pool, mode, keys, schema, fencing, timeout }`: PostgreSQL advisory
   * locks (transaction-scoped by default, `resource` = the transaction's client; token from
   * a counter table). Run-once claims in a table.
   */
  postgres: postgresShortcut,
  /** A mysql2 pool, or `{ pool | connection, database, fencing, timeout }`: MariaDB/MySQL GET_LOCK on a dedicated connection; token from a counter table. */
  mysql: mysqlShortcut,
}

type ShortcutOption = keyof typeof SHORTCUTS

/** The backend shortcuts `createLocks` accepts: one field per backend, and exactly one of them (or `backend`) per call. */
export type BackendShortcuts = {
  [Option in keyof typeof SHORTCUTS]?: (typeof SHORTCUTS)[Option] extends BackendShortcut<infer Value> ? Value : never
}

/** Options each store-backed shortcut understands. */
export interface StoreOptions {
  /** Prefix of every name a backend creates in its store. Default `'sg-lock'`. */
  namespace?: string
  /** Bound on each call to the store, in ms or `'1s'`; a call past it fails with the backend's typed error. Default `'1s'`. */
  commandTimeout?: Duration
}

export const SHORTCUT_OPTIONS = Object.keys(SHORTCUTS) as readonly ShortcutOption[]

export function resolveBackend(
  options: BackendShortcuts & StoreOptions & { backend?: LockBackend<unknown> },
): LockBackend<unknown> {
  const given = [
    ...(options.backend === undefined ? [] : ['backend']),
    ...SHORTCUT_OPTIONS.filter((option) => options[option] !== undefined),
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
  const option = given[0] as ShortcutOption
  return (SHORTCUTS[option] as BackendShortcut<unknown>).create(options[option], settings)
}
