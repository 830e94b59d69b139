export { Cache, createCache } from './cache/cache.js'
export type { LoadOutcome, LoadResult } from './cache/call.js'
export type { WrapOptions, Wrapped } from './cache/wrap.js'
export type { CacheNamespace } from './cache/namespace.js'
export type { DeleteOutcome } from './cache/delete-outbox.js'
export type { BatchLoader, BatchLoaderContext, BatchResult } from './cache/batch-loads.js'
export type { Batcher, BatcherOptions } from './cache/batcher.js'
export type { ManyResult } from './cache/load-many.js'
export type { Loader, LoaderContext } from './context.js'
export type { Duration } from './duration.js'
export type { RedisClientLike } from './redis-client.js'
export { jsonCodec, superjsonCodec, type BinaryCodec, type Codec, type SuperJsonLike } from './codecs.js'
export { msgpackCodec, type MsgpackrLike } from './msgpack-codec.js'
export type { CompressionAlgorithm, CompressionOptions } from './compression.js'
export { BinaryValue } from './entry.js'
export {
  BatchResultError,
  CacheClosedError,
  CodecMismatchError,
  CorruptValueError,
  FencingUnsupportedError,
  InvalidArgumentError,
  LoaderConcurrencyError,
  LoaderTimeoutError,
  LockBackendError,
  LockBusyError,
  LockLostError,
  LocksClosedError,
  LockWaitTimeoutError,
  RedisUnavailableError,
  RemoteLoaderError,
  SerializationError,
  ValueTooLargeError,
  StampedeGuardError,
} from './errors.js'
export type { CacheEventName, CacheEvents, CacheStats, StaleReason, WaitOutcome } from './events.js'
export type {
  CacheOptions,
  CallOptions,
  CircuitBreakerOptions,
  DeleteOptions,
  DurableDeleteOptions,
  EarlyRefresh,
  L1Options,
  LoaderConcurrencyOptions,
  LockOptions,
  PolicyOptions,
  RedisCommandOptions,
} from './options.js'
export {
  createLocks,
  locked,
  Locks,
  type CreateLocksOptions,
  type LockedOptions,
  type HeldLockHandle,
  type LockCallOptions,
  type LockContext,
  type LockDefaults,
} from './lock/index.js'
export type {
  HeldPermitsHandle,
  PermitContext,
  Semaphore,
  SemaphoreCallOptions,
  SemaphoreOptions,
  WithPermitOptions,
} from './lock/index.js'
export {
  schedule,
  type RunOnceContext,
  type RunOnceOptions,
  type RunOnceResult,
  type Schedule,
  type ScheduleOptions,
  type ScheduleStats,
  type Tick,
} from './lock/index.js'
export {
  LeaderObserver,
  LockUpgradeError,
  ReadWriteLock,
  type CoalesceContext,
  type CoalesceOptions,
  type CoalesceResult,
  type ElectOptions,
  type Leader,
  type Leadership,
  type MultiLockContext,
  type ObserveOptions,
} from './lock/index.js'
