/** `createLocks`: its options, checked before any backend opens, and the backend it resolves. */
import { InvalidArgumentError } from '../errors.js'
import type { LockBackend } from './backend.js'
import type {
  BackendLocksOptions,
  EtcdFencedWrites,
  EtcdLocksOptions,
  MysqlLocksOptions,
  PoolClientOf,
  PostgresLocksOptions,
  PostgresSessionLocksOptions,
  RedisLocksOptions,
  RedlockLocksOptions,
  ZooKeeperFencedWrites,
  ZooKeeperLocksOptions,
} from './inferred-resource.js'
import { Locks } from './locks.js'
import { parseDefaults, type LockDefaults } from './options.js'
import type { PgPoolLike } from './postgres/options.js'
import { resolveBackend, SHORTCUT_OPTIONS, type BackendShortcuts, type StoreOptions } from './resolve-backend.js'

const CREATE_KEYS = new Set([
  'backend',
  'lease',
  'wait',
  'reentrant',
  'maxKeyLength',
  'fair',
  'namespace',
  'commandTimeout',
  ...SHORTCUT_OPTIONS,
])

export interface CreateLocksOptions<Resource = void> extends LockDefaults, BackendShortcuts, StoreOptions {
  /** Any `LockBackend`; the shortcuts (`redis`, `redlock`, …) build one for you. Give exactly one. */
  backend?: LockBackend<Resource>
}

/**
 * Distributed locks: `createLocks({ redis })`, `createLocks({ redlock: [r1, …, r5] })`,
 * `createLocks({ postgres: pool })`, …, or `createLocks({ backend })` with any `LockBackend`.
 * The type of `resource` follows from the backend option (see inferred-resource.ts):
 * `createLocks({ postgres: pool })` with a `pg.Pool` gives `Locks<pg.PoolClient>`.
 */
export function createLocks<Pool extends PgPoolLike>(options: PostgresLocksOptions<Pool>): Locks<PoolClientOf<Pool>>
export function createLocks(options: PostgresSessionLocksOptions): Locks<undefined>
export function createLocks(options: MysqlLocksOptions): Locks<undefined>
export function createLocks(options: RedisLocksOptions | RedlockLocksOptions): Locks<void>
export function createLocks(options: EtcdLocksOptions): Locks<EtcdFencedWrites>
export function createLocks(options: ZooKeeperLocksOptions): Locks<ZooKeeperFencedWrites>
export function createLocks<Resource>(options: BackendLocksOptions<Resource>): Locks<Resource>
/** With the resource type given explicitly (`createLocks<MyResource>({ backend })`). */
export function createLocks<Resource = void>(options: CreateLocksOptions<Resource>): Locks<Resource>
export function createLocks<Resource = void>(options: CreateLocksOptions<Resource>): Locks<Resource> {
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('options', 'expected an object')
  for (const name of Object.keys(options)) {
    if (!CREATE_KEYS.has(name))
      throw new InvalidArgumentError(name, `unknown createLocks option (known: ${[...CREATE_KEYS].join(', ')})`)
  }
  const { lease, wait, reentrant, maxKeyLength, fair } = options
  const defaults = { lease, wait, reentrant, maxKeyLength, fair }
  parseDefaults(defaults) // before a backend opens anything
  return new Locks<Resource>(resolveBackend(options as never) as LockBackend<Resource>, defaults)
}
