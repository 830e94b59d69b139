export type { AcquireRequest, Claim, ClaimStore, HeldLock, LockBackend, Liveness } from './backend.js'
export { locked, type LockedOptions } from './decorator.js'
export type { LockEventName, LockEvents, LockEventSource } from './events.js'
export { type HeldLockHandle, type LockContext } from './handle.js'
export { Locks } from './locks.js'
export { createLocks, type CreateLocksOptions } from './create-locks.js'
export type { LockCallOptions, LockDefaults } from './options.js'
export type { BackendShortcuts, StoreOptions } from './resolve-backend.js'
export type { RunOnceContext, RunOnceOptions, RunOnceResult } from './run-once.js'
export { schedule, type Schedule, type ScheduleOptions, type ScheduleStats, type Tick } from './schedule.js'
export { createPostgresBackend, type PostgresLockOptions, type PostgresKeyMapping } from './postgres/backend.js'
export { createMysqlBackend, type MysqlLockOptions } from './mysql/backend.js'
export type { Semaphore, HeldPermitsHandle, PermitContext } from './semaphore/semaphore.js'
export type { SemaphoreOptions, SemaphoreCallOptions, WithPermitOptions } from './semaphore/options.js'
export type { HeldPermits, SemaphoreRequest, SemaphoreStore } from './semaphore/contract.js'
export type { EtcdFencedWrites } from './etcd/held-lock.js'
export type { ZooKeeperFencedWrites } from './zookeeper/held-lock.js'
export * from './election/index.js'
export { ReadWriteLock } from './read-write/read-write.js'
export type { MultiLockContext } from './multi/multi.js'
export type { CoalesceContext, CoalesceOptions, CoalesceResult } from './coalesce/coalesce.js'
export type { CoalesceStore, CoalescedRun } from './coalesce/store.js'
export type { ReadWriteStore } from './read-write/store.js'
export type { EtcdClientLike, EtcdTxnLike } from './etcd/client-like.js'
export type { ZooKeeperClientLike, ZooKeeperTransactionLike } from './zookeeper/client-like.js'
export {
  FencingUnsupportedError,
  InvalidArgumentError,
  LockBackendError,
  LockBusyError,
  LockLostError,
  LocksClosedError,
  LockUpgradeError,
  RedisUnavailableError,
  StampedeGuardError,
} from '../errors.js'
