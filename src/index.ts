export { Cache, createCache, type LoadOutcome, type LoadResult } from './cache.js'
export type { Loader, LoaderContext } from './context.js'
export type { Duration } from './duration.js'
export { jsonCodec, type Codec } from './entry.js'
export {
  CacheClosedError,
  InvalidArgumentError,
  LoaderTimeoutError,
  LockLostError,
  LockWaitTimeoutError,
  RedisUnavailableError,
  RemoteLoaderError,
  SerializationError,
  StampedeGuardError,
} from './errors.js'
export type { CacheEventName, CacheEvents, CacheStats, StaleReason } from './events.js'
export type { CacheOptions, CircuitBreakerOptions, EarlyRefresh, L1Options, LockOptions, PolicyOptions } from './options.js'
