import { parseDuration, type Duration } from '../../duration.js'
import { InvalidArgumentError } from '../../errors.js'
import { parseLease, validateKey, type LockSettings } from '../options.js'
import { MAX_PERMITS } from './contract.js'

/** `locks.semaphore(name, options)`. */
export interface SemaphoreOptions {
  /**
   * How many permits exist: at most this many are held at once, across every process using
   * this semaphore's name in the store. An integer in 1..10,000 (each held permit is one
   * record in the store). Required. Every process must give the same number: each call is
   * admitted against its own `permits`.
   */
  permits: number
  /** Default lease of this semaphore's permits (see {@link SemaphoreCallOptions.lease}). Default: `createLocks`' `lease` (`'5s'`). */
  lease?: Duration
  /** Default wait of `acquire`/`withPermit` (see {@link SemaphoreCallOptions.wait}). Default: `createLocks`' `wait` (`'10s'`). */
  wait?: Duration
}

/** Options of one `acquire` / `tryAcquire` / `withPermit` call. */
export interface SemaphoreCallOptions {
  /**
   * How long a permit outlives a holder that died without giving it back: its permits come
   * back to the others this long after its last renewal. Renewed every lease/3 while held.
   * Also how long a waiter that died keeps its place in line. 30 ms … 2³¹−1 ms, or `'5s'`.
   */
  lease?: Duration
  /** How long to wait in line before `LockBusyError`; `0` = one attempt. At most 2³¹−1 ms. */
  wait?: Duration
  /** Abort to stop waiting (the call rejects with its reason; its place in line is given up). */
  signal?: AbortSignal
}

/** `withPermit`'s options: a call's, and how many permits to take. */
export interface WithPermitOptions extends SemaphoreCallOptions {
  /** Permits to take at once, in 1..`permits`. Default 1. */
  count?: number
}

export interface SemaphoreSettings {
  name: string
  permits: number
  leaseMs: number
  waitMs: number
}

const SEMAPHORE_KEYS = new Set(['permits', 'lease', 'wait'])
const CALL_KEYS = new Set(['lease', 'wait', 'signal'])

function checkObject(argument: string, value: unknown, known: Set<string>, what: string): void {
  if (value === null || typeof value !== 'object')
    throw new InvalidArgumentError(argument, `expected an object, got ${value === null ? 'null' : typeof value}`)
  for (const name of Object.keys(value)) {
    if (!known.has(name))
      throw new InvalidArgumentError(name, `unknown ${what} option (known: ${[...known].join(', ')})`)
  }
}

export function parseSemaphore(name: unknown, options: unknown, defaults: LockSettings): SemaphoreSettings {
  let checked: string
  try {
    checked = validateKey(name, defaults.maxKeyLength)
  } catch (error) {
    throw new InvalidArgumentError('name', (error as Error).message.replace(/^key: /, ''))
  }
  checkObject('options', options, SEMAPHORE_KEYS, 'semaphore')
  const { permits, lease, wait } = options as SemaphoreOptions
  if (!Number.isSafeInteger(permits) || permits < 1 || permits > MAX_PERMITS)
    throw new InvalidArgumentError('permits', `must be an integer in 1..${MAX_PERMITS}, got ${String(permits)}`)
  return {
    name: checked,
    permits,
    leaseMs: lease === undefined ? defaults.leaseMs : parseLease('lease', lease),
    waitMs: wait === undefined ? defaults.waitMs : parseDuration('wait', wait, true),
  }
}

export interface SemaphoreCall {
  count: number
  leaseMs: number
  waitMs: number
  signal?: AbortSignal
}

/** One call's `count` and options over the semaphore's; `waits: false` for `tryAcquire`. */
export function parseSemaphoreCall(
  count: unknown,
  options: unknown,
  semaphore: SemaphoreSettings,
  waits: boolean,
  extraKeys: readonly string[] = [],
): SemaphoreCall {
  if (!Number.isSafeInteger(count) || (count as number) < 1 || (count as number) > semaphore.permits)
    throw new InvalidArgumentError(
      'count',
      `must be an integer in 1..${semaphore.permits} (the semaphore's permits), got ${String(count)}`,
    )
  if (options === undefined)
    return { count: count as number, leaseMs: semaphore.leaseMs, waitMs: waits ? semaphore.waitMs : 0 }
  checkObject('options', options, new Set([...CALL_KEYS, ...extraKeys]), 'semaphore call')
  const { lease, wait, signal } = options as SemaphoreCallOptions
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new InvalidArgumentError('signal', 'expected an AbortSignal')
  if (!waits && wait !== undefined)
    throw new InvalidArgumentError('wait', 'tryAcquire never waits; use acquire(count, { wait })')
  return {
    count: count as number,
    leaseMs: lease === undefined ? semaphore.leaseMs : parseLease('lease', lease),
    waitMs: !waits ? 0 : wait === undefined ? semaphore.waitMs : parseDuration('wait', wait, true),
    signal,
  }
}
