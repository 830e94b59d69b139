import os from 'node:os'
import { randomBytes } from 'node:crypto'
import type { Duration } from '../../duration.js'
import { InvalidArgumentError } from '../../errors.js'
import { namedKey, parseLease, validateKey } from '../options.js'

/** Longest candidate id, in UTF-16 code units: it is stored with the lock and sent to every observer. */
export const MAX_CANDIDATE_ID_LENGTH = 256

export interface ElectOptions {
  /**
   * This candidate's id, as `observe()` reports it. Default `<hostname>:<pid>:<8 random hex>`.
   * A non-empty string of at most 256 characters.
   */
  id?: string
  /**
   * How long a leader that died (or was cut off) keeps the election from choosing another:
   * the leadership is a lease, renewed every lease/3 while held, and given up by this
   * process's monotonic clock at `last confirmed renewal sent + lease − margin`, before the
   * store can let anyone else in. etcd rounds it up to whole seconds; on ZooKeeper the
   * session timeout rules instead. Milliseconds or `'5s'`; default: the `createLocks` lease (`'5s'`).
   */
  lease?: Duration
  /** Abort to stop campaigning (the call rejects with its reason), or, with `onElected`, to end the candidacy. Does not end a leadership already won: `resign()` does. */
  signal?: AbortSignal
  /**
   * Runs the leader's work, once per term: called with each leadership this candidate wins.
   * The term lasts until its promise settles (then it resigns) or the leadership is lost
   * (its `signal` aborts: stop). Then the candidate campaigns again, until `signal`
   * aborts or `close()`. Its error goes to `process.emitWarning`; the candidacy goes on.
   * Without it, `elect()` campaigns once.
   */
  onElected?: (leadership: Leadership) => unknown
}

/** A won election: hold it until `resign()`, `await using`, or its `signal` aborts. */
export interface Leadership extends AsyncDisposable {
  readonly name: string
  /** This candidate's id (`ElectOptions.id`). */
  readonly id: string
  /**
   * The fencing token of this term: strictly greater than every earlier leader's, on the
   * same store. Hand it to what the leader writes, and let that refuse older terms.
   */
  readonly term: bigint
  /** Aborts with `LockLostError` when the leadership ends without `resign()`: stop leading. */
  readonly signal: AbortSignal
  /**
   * Whether this process still leads, by its own monotonic clock, read now: `false` once
   * `signal` aborted, and also once the lease's local deadline has passed although no timer
   * has run yet (the first instant after a pause, SIGSTOP or GC), in which case it aborts
   * `signal` on the spot. Check it right before a side effect that no fence protects.
   */
  readonly leading: boolean
  /** Steps down: gives the leadership back so the next candidate is elected at once. Idempotent. */
  resign(): Promise<void>
}

export interface ElectSettings {
  id: string
  leaseMs: number
  signal: AbortSignal | undefined
  onElected: ((leadership: Leadership) => unknown) | undefined
}

const ELECT_KEYS = new Set(['id', 'lease', 'signal', 'onElected'])

export function defaultCandidateId(): string {
  return `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
}

/** Validates `elect(name, options)`; nothing is sent before this passes. */
export function parseElect(
  name: unknown,
  options: ElectOptions | undefined,
  defaultLeaseMs: number,
  maxKeyLength: number,
): { name: string; settings: ElectSettings } {
  const checkedName = electionName(name, maxKeyLength)
  if (options !== undefined && (options === null || typeof options !== 'object'))
    throw new InvalidArgumentError('options', `expected an object, got ${options === null ? 'null' : typeof options}`)
  const given = options ?? {}
  for (const key of Object.keys(given))
    if (!ELECT_KEYS.has(key))
      throw new InvalidArgumentError(key, `unknown elect option (known: ${[...ELECT_KEYS].join(', ')})`)
  const { signal, onElected } = given
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new InvalidArgumentError('signal', 'expected an AbortSignal')
  if (onElected !== undefined && typeof onElected !== 'function')
    throw new InvalidArgumentError('onElected', `expected a function, got ${typeof onElected}`)
  const id = given.id === undefined ? defaultCandidateId() : candidateId(given.id)
  const leaseMs = given.lease === undefined ? defaultLeaseMs : parseLease('lease', given.lease)
  return { name: checkedName, settings: { id, leaseMs, signal, onElected } }
}

/** An election's name follows the lock key rules, reported as `name`. */
export function electionName(name: unknown, maxKeyLength: number): string {
  return namedKey('name', name, maxKeyLength)
}

function candidateId(id: unknown): string {
  if (typeof id !== 'string') throw new InvalidArgumentError('id', `expected a string, got ${typeof id}`)
  if (id.length === 0 || id.length > MAX_CANDIDATE_ID_LENGTH)
    throw new InvalidArgumentError('id', `must be 1 to ${MAX_CANDIDATE_ID_LENGTH} characters, got ${id.length}`)
  try {
    validateKey(id, MAX_CANDIDATE_ID_LENGTH)
  } catch {
    throw new InvalidArgumentError('id', 'contains a lone surrogate (not well-formed UTF-16)')
  }
  return id
}
