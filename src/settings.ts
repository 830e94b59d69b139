import { parseDuration, type Duration } from './duration.js'
import { InvalidArgumentError } from './errors.js'
import { positiveInteger } from './counts.js'
import { jsonCodec, type BinaryCodec, type Codec } from './codecs.js'
import { resolveCompression } from './compression.js'
import { valueFormat, type ValueFormat } from './stored-value.js'
import type { CacheOptions, CallOptions, EarlyRefresh, PolicyOptions } from './options.js'
import { parseShardedPubSub } from './redis/server-probe.js'
import { DEFAULT_MAX_POLL_RATE } from './redis/poll-scheduler.js'
import { parseReplicaWait, type ReplicaWait } from './redis/replicas.js'

/*
 * The options of options.ts resolved: every duration parsed to milliseconds, every default
 * applied, every name and value checked, failing fast with a typed error naming the option.
 */

export type ResolvedEarlyRefresh =
  { kind: 'off' } | { kind: 'threshold'; fraction: number } | { kind: 'xfetch'; beta: number }

/** A policy with every duration parsed to milliseconds. */
export interface Policy {
  ttl: number
  staleTtl: number
  staleIfError: number
  failSafeBackoff: number
  softTimeout: number
  hardTimeout: number
  waitTimeout: number
  onWaitTimeout: 'load' | 'throw'
  earlyRefresh: ResolvedEarlyRefresh
  negativeTtl: number
}

export interface Settings {
  namespace: string
  policy: Policy
  l1: { max: number; maxBytes: number; maxTtl: number } | false
  lock: {
    lease: number
    maxHold: number
    pollInterval: number
    maxPollInterval: number
    maxPollRate: number
    waitForReplicas: ReplicaWait | undefined
  }
  redisTimeout: number
  redisFailoverWait: number
  redisCommands: { maxInFlight: number; maxQueued: number }
  maxValueBytes: number
  maxBackgroundRefreshes: number
  maxWaits: number
  maxPendingWaits: number
  ttlJitter: number
  breaker: { threshold: number; openFor: number }
  codec: Codec | BinaryCodec
  /** How values are stored: the codec, compression and maxValueBytes together (stored-value.ts). */
  format: ValueFormat
  maxKeyLength: number
  /** `clearable`: the cache's own keys carry the cache-wide generation, so `clear()` empties them too. */
  clearable: boolean
  shardedPubSub: boolean | 'auto'
  maxKeysPerTag: number
  tagClockSkew: number
  /** `loaderConcurrency`, or undefined when off. */
  loaderConcurrency: { limit: number; maxQueued: number } | undefined
}

/** Names of the options `getOrLoad` takes per call (for wrappers that pass them through). */
export const POLICY_OPTION_NAMES = [
  'ttl',
  'staleTtl',
  'staleIfError',
  'failSafeBackoff',
  'softTimeout',
  'hardTimeout',
  'waitTimeout',
  'onWaitTimeout',
  'earlyRefresh',
  'negativeTtl',
] as const
const CACHE_KEYS = new Set<string>([
  ...POLICY_OPTION_NAMES,
  'redis',
  'namespace',
  'l1',
  'lock',
  'redisTimeout',
  'redisFailoverWait',
  'circuitBreaker',
  'codec',
  'compression',
  'maxKeyLength',
  'shardedPubSub',
  'redisCommands',
  'maxValueBytes',
  'maxBackgroundRefreshes',
  'maxWaits',
  'maxPendingWaits',
  'ttlJitter',
  'maxKeysPerTag',
  'tagClockSkew',
  'loaderConcurrency',
  'durableDeletes',
  'clearable',
])
const CALL_KEYS = new Set<string>([...POLICY_OPTION_NAMES, 'tags', 'forceRefresh'])
const L1_KEYS = new Set(['max', 'maxBytes', 'maxTtl'])
/** l1.maxTtl's default: see L1Options.maxTtl. */
const DEFAULT_L1_MAX_TTL_MS = 60_000
/** Default of `maxWaits`. */
export const DEFAULT_MAX_WAITS = 1_000
/** Default of `maxValueBytes`: 32 MiB. */
export const DEFAULT_MAX_VALUE_BYTES = 32 * 1024 * 1024
/** Default of `maxPendingWaits`. */
export const DEFAULT_MAX_PENDING_WAITS = 100_000
/** Default of `l1.maxBytes`. */
export const DEFAULT_L1_MAX_BYTES = 64 * 1024 * 1024
const LOCK_KEYS = new Set(['lease', 'maxHold', 'pollInterval', 'maxPollInterval', 'maxPollRate', 'waitForReplicas'])
const BREAKER_KEYS = new Set(['threshold', 'openFor'])
const REDIS_COMMAND_KEYS = new Set(['maxInFlight', 'maxQueued'])

function rejectUnknown(where: string, options: object, known: Set<string>): void {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError(where, 'must be an object')
  for (const name of Object.keys(options)) {
    if (!known.has(name)) throw new InvalidArgumentError(`${where}.${name}`, 'unknown option')
  }
}

function resolveEarlyRefresh(value: EarlyRefresh): ResolvedEarlyRefresh {
  if (value === false) return { kind: 'off' }
  if (value === 'xfetch') return { kind: 'xfetch', beta: 1 }
  if (typeof value === 'number') {
    if (!(value > 0 && value < 1))
      throw new InvalidArgumentError('earlyRefresh', `a threshold must be between 0 and 1 (exclusive), got ${value}`)
    return { kind: 'threshold', fraction: value }
  }
  if (
    typeof value === 'object' &&
    value !== null &&
    typeof value.beta === 'number' &&
    value.beta > 0 &&
    Number.isFinite(value.beta)
  ) {
    return { kind: 'xfetch', beta: value.beta }
  }
  throw new InvalidArgumentError(
    'earlyRefresh',
    `expected false, a fraction, 'xfetch' or { beta > 0 }, got ${JSON.stringify(value)}`,
  )
}

/** Merges `overrides` onto `base`, parsing and validating each given field. */
export function resolvePolicy(base: Policy | undefined, overrides: PolicyOptions): Policy {
  const ttl = overrides.ttl ?? base?.ttl
  if (ttl === undefined) throw new InvalidArgumentError('ttl', 'is required')
  const duration = (name: keyof PolicyOptions, fallback: number, allowZero: boolean): number => {
    const given = overrides[name] as Duration | undefined
    return given === undefined ? fallback : parseDuration(name, given, allowZero)
  }
  const onWaitTimeout = overrides.onWaitTimeout ?? base?.onWaitTimeout ?? 'load'
  if (onWaitTimeout !== 'load' && onWaitTimeout !== 'throw') {
    throw new InvalidArgumentError('onWaitTimeout', `must be 'load' or 'throw', got ${JSON.stringify(onWaitTimeout)}`)
  }
  return {
    ttl: overrides.ttl === undefined ? base!.ttl : parseDuration('ttl', overrides.ttl),
    staleTtl: duration('staleTtl', base?.staleTtl ?? 0, true),
    staleIfError: duration('staleIfError', base?.staleIfError ?? 0, true),
    failSafeBackoff: duration('failSafeBackoff', base?.failSafeBackoff ?? 5_000, true),
    softTimeout: duration('softTimeout', base?.softTimeout ?? 0, true),
    hardTimeout: duration('hardTimeout', base?.hardTimeout ?? 0, true),
    waitTimeout: duration('waitTimeout', base?.waitTimeout ?? 10_000, false),
    onWaitTimeout,
    earlyRefresh:
      overrides.earlyRefresh === undefined
        ? (base?.earlyRefresh ?? { kind: 'off' })
        : resolveEarlyRefresh(overrides.earlyRefresh),
    negativeTtl: duration('negativeTtl', base?.negativeTtl ?? 0, true),
  }
}

/** Validates per-call options; fails with the option's name in the message. */
/** Call options fixed for good (see fixedCallOptions): their policy is resolved once per cache. */
const FIXED_CALL_OPTIONS = new WeakSet<CallOptions>()

/**
 * `options`, frozen with what it holds and marked fixed, so that a cache resolves its policy
 * once instead of on every call. For options made once and passed on every call (an HTTP
 * route's); a caller's own options object may change between calls, so it is never marked.
 */
export function fixedCallOptions<T extends CallOptions>(options: T): T {
  const copy = { ...options }
  if (typeof copy.earlyRefresh === 'object' && copy.earlyRefresh !== null)
    copy.earlyRefresh = Object.freeze({ ...copy.earlyRefresh })
  if (Array.isArray(copy.tags)) copy.tags = Object.freeze([...copy.tags]) as string[]
  FIXED_CALL_OPTIONS.add(Object.freeze(copy))
  return copy
}

/** Whether `options` came from fixedCallOptions (unchanged since, since frozen). */
export function isFixedCallOptions(options: CallOptions): boolean {
  return FIXED_CALL_OPTIONS.has(options)
}

export function resolveCallPolicy(base: Policy, options: CallOptions): Policy {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('options', 'must be an object')
  rejectUnknown('options', options, CALL_KEYS)
  return resolvePolicy(base, options)
}

/** Validates everything given to `createCache`, failing fast with the option's name. */
export function resolveSettings(options: CacheOptions): Settings {
  if (typeof options !== 'object' || options === null)
    throw new InvalidArgumentError('options', 'createCache needs an options object with at least { ttl }')
  rejectUnknown('options', options, CACHE_KEYS)
  const namespace = options.namespace ?? 'sg'
  if (typeof namespace !== 'string' || namespace === '' || /[{}\s]/.test(namespace)) {
    throw new InvalidArgumentError('namespace', 'must be a non-empty string without braces or spaces')
  }
  const l1 = options.l1 ?? {}
  const lock = options.lock ?? {}
  const breaker = options.circuitBreaker ?? {}
  if (l1 !== false) rejectUnknown('l1', l1, L1_KEYS)
  rejectUnknown('lock', lock, LOCK_KEYS)
  rejectUnknown('circuitBreaker', breaker, BREAKER_KEYS)
  const commands = options.redisCommands ?? {}
  rejectUnknown('redisCommands', commands, REDIS_COMMAND_KEYS)
  const ttlJitter = options.ttlJitter ?? 0.05
  if (typeof ttlJitter !== 'number' || !(ttlJitter >= 0 && ttlJitter < 1))
    throw new InvalidArgumentError('ttlJitter', `must be a fraction in [0, 1), got ${String(ttlJitter)}`)
  const maxValueBytes = positiveInteger('maxValueBytes', options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES)
  const { codec, format } = resolveFormat(options, maxValueBytes)
  const lease = parseDuration('lock.lease', lock.lease ?? 5_000)
  if (lease < 30) throw new InvalidArgumentError('lock.lease', `must be at least 30 ms, got ${lease}`)
  const maxHold = parseDuration('lock.maxHold', lock.maxHold ?? 60_000)
  if (maxHold < lease)
    throw new InvalidArgumentError('lock.maxHold', `must be at least lock.lease (${lease} ms), got ${maxHold}`)
  const pollInterval = parseDuration('lock.pollInterval', lock.pollInterval ?? 50)
  const maxPollInterval = parseDuration('lock.maxPollInterval', lock.maxPollInterval ?? 1_000)
  if (maxPollInterval < pollInterval)
    throw new InvalidArgumentError(
      'lock.maxPollInterval',
      `must be at least lock.pollInterval (${pollInterval} ms), got ${maxPollInterval}`,
    )
  return {
    namespace,
    policy: resolvePolicy(undefined, options),
    l1: l1 === false ? false : resolveL1(l1),
    lock: {
      lease,
      maxHold,
      pollInterval,
      maxPollInterval,
      maxPollRate: positiveInteger('lock.maxPollRate', lock.maxPollRate ?? DEFAULT_MAX_POLL_RATE),
      waitForReplicas: parseReplicaWait('lock.waitForReplicas', lock.waitForReplicas),
    },
    redisTimeout: parseDuration('redisTimeout', options.redisTimeout ?? 1_000),
    redisFailoverWait: parseDuration('redisFailoverWait', options.redisFailoverWait ?? 5_000, true),
    redisCommands: {
      maxInFlight: positiveInteger('redisCommands.maxInFlight', commands.maxInFlight ?? 256),
      maxQueued: positiveInteger('redisCommands.maxQueued', commands.maxQueued ?? 50_000),
    },
    maxValueBytes,
    maxBackgroundRefreshes: positiveInteger('maxBackgroundRefreshes', options.maxBackgroundRefreshes ?? 64),
    maxWaits: positiveInteger('maxWaits', options.maxWaits ?? DEFAULT_MAX_WAITS),
    maxPendingWaits: positiveInteger('maxPendingWaits', options.maxPendingWaits ?? DEFAULT_MAX_PENDING_WAITS),
    ttlJitter,
    breaker: {
      threshold: positiveInteger('circuitBreaker.threshold', breaker.threshold ?? 3),
      openFor: parseDuration('circuitBreaker.openFor', breaker.openFor ?? 2_000),
    },
    codec,
    format,
    maxKeyLength: positiveInteger('maxKeyLength', options.maxKeyLength ?? 1024),
    clearable: parseBoolean('clearable', options.clearable ?? false),
    shardedPubSub: parseShardedPubSub('shardedPubSub', options.shardedPubSub, options.redis),
    maxKeysPerTag: positiveInteger('maxKeysPerTag', options.maxKeysPerTag ?? 10_000),
    tagClockSkew: parseDuration(
      'tagClockSkew',
      options.tagClockSkew ?? (options.redis?.isCluster === true ? 20 : 0),
      true,
    ),
    loaderConcurrency: parseLoaderConcurrency(options),
  }
}

/** `codec` and `compression`: how values are stored (stored-value.ts). */
function resolveFormat(
  options: CacheOptions,
  maxValueBytes: number,
): { codec: Settings['codec']; format: ValueFormat } {
  const codec = options.codec ?? jsonCodec
  if (typeof codec?.encode !== 'function' || typeof codec?.decode !== 'function') {
    throw new InvalidArgumentError('codec', 'must have encode(value) and decode(text) functions')
  }
  try {
    return { codec, format: valueFormat(codec, resolveCompression(options.compression), maxValueBytes) }
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw error
    throw new InvalidArgumentError('codec', (error as Error).message)
  }
}

function resolveL1(l1: Exclude<CacheOptions['l1'], false | undefined>): Exclude<Settings['l1'], false> {
  return {
    max: positiveInteger('l1.max', l1.max ?? 10_000),
    maxBytes: positiveInteger('l1.maxBytes', l1.maxBytes ?? DEFAULT_L1_MAX_BYTES),
    maxTtl:
      l1.maxTtl === undefined
        ? DEFAULT_L1_MAX_TTL_MS
        : l1.maxTtl === Infinity
          ? Infinity
          : parseDuration('l1.maxTtl', l1.maxTtl),
  }
}

const LOADER_CONCURRENCY_KEYS = new Set(['limit', 'maxQueued'])

function parseLoaderConcurrency(options: CacheOptions): Settings['loaderConcurrency'] {
  const option = options.loaderConcurrency
  if (option === undefined || option === false) return undefined
  if (option === null || typeof option !== 'object')
    throw new InvalidArgumentError('loaderConcurrency', 'expected { limit } or false')
  for (const name of Object.keys(option)) {
    if (!LOADER_CONCURRENCY_KEYS.has(name))
      throw new InvalidArgumentError(`loaderConcurrency.${name}`, 'unknown option (known: limit, maxQueued)')
  }
  if (!options.redis) throw new InvalidArgumentError('loaderConcurrency', 'needs Redis: it caps loads across processes')
  const limit = positiveInteger('loaderConcurrency.limit', option.limit)
  if (limit > 10_000)
    throw new InvalidArgumentError('loaderConcurrency.limit', `must be an integer in 1..10000, got ${limit}`)
  return { limit, maxQueued: positiveInteger('loaderConcurrency.maxQueued', option.maxQueued ?? 10_000) }
}

function parseBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new InvalidArgumentError(name, `must be true or false, got ${typeof value}`)
  return value
}
