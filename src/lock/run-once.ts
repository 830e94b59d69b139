import { parseDuration, type Duration } from '../duration.js'
import { InvalidArgumentError, LockLostError } from '../errors.js'
import type { ClaimStore } from './backend.js'
import { orDefault, validateKey } from './options.js'
import { leaseMarginMs } from '../lease/watchdog.js'

/** Options of `locks.runOnce` (ShedLock's names and meaning). */
export interface RunOnceOptions {
  /**
   * The longest the claim stands: when an instance crashes mid-run, the job can run again
   * this long after it started. Size it well above the job's longest run: past it,
   * another instance may start the job while this one is still running (`signal` then
   * aborts here). Required. Milliseconds or `'10m'`.
   */
  lockAtMostFor: Duration
  /**
   * The shortest the claim stands, even after a fast run, so an instance whose timer or
   * clock is a little late skips the tick instead of running it again. Keep it below the
   * job's interval and above the worst timer lateness between instances. Default 0.
   */
  lockAtLeastFor?: Duration
}

/** What the job receives. */
export interface RunOnceContext {
  /** Aborts with `LockLostError` once `lockAtMostFor` has passed (by this process's clock, minus a margin). */
  readonly signal: AbortSignal
}

/**
 * `ran: true` with the job's result when this instance ran it; `ran: false` when another
 * instance's claim on this tick is still live (skipped at once, without waiting).
 * `finishError`: the claim could not be ended after the run, so it stands until
 * `lockAtMostFor` (the job does not run again sooner; nothing is lost).
 */
export type RunOnceResult<T> = { ran: true; value: T; finishError?: Error } | { ran: false }

const OPTION_NAMES = new Set(['lockAtMostFor', 'lockAtLeastFor'])

export interface RunOnceSettings {
  atMostMs: number
  atLeastMs: number
}

export function parseRunOnceOptions(options: RunOnceOptions): RunOnceSettings {
  if (options === null || typeof options !== 'object')
    throw new InvalidArgumentError('options', 'expected { lockAtMostFor, lockAtLeastFor? }')
  for (const name of Object.keys(options)) {
    if (!OPTION_NAMES.has(name))
      throw new InvalidArgumentError(name, `unknown runOnce option (known: ${[...OPTION_NAMES].join(', ')})`)
  }
  if (options.lockAtMostFor === undefined)
    throw new InvalidArgumentError(
      'lockAtMostFor',
      'is required: how long a crashed run keeps the job from running again',
    )
  const atMostMs = parseDuration('lockAtMostFor', options.lockAtMostFor)
  const atLeastMs = parseDuration('lockAtLeastFor', orDefault(options.lockAtLeastFor, 0), true)
  if (atLeastMs > atMostMs)
    throw new InvalidArgumentError('lockAtLeastFor', `must not exceed lockAtMostFor (${atLeastMs} ms > ${atMostMs} ms)`)
  return { atMostMs, atLeastMs }
}

/**
 * ShedLock semantics over a backend's `ClaimStore`: at most one instance runs a tick of
 * job `name`; every other instance skips it at once. The claim's instants come from the
 * store's clock. The job's error propagates to the instance that ran it, after the claim
 * was finished (lockAtLeastFor still applies, so a failing job is not retried at once by
 * the next instance whose timer fires late).
 */
export async function runOnce<T>(
  claims: ClaimStore | undefined,
  backendName: string,
  name: string,
  fn: (context: RunOnceContext) => T | Promise<T>,
  options: RunOnceOptions,
  maxKeyLength: number,
): Promise<RunOnceResult<T>> {
  renamed('name', () => validateKey(name, maxKeyLength))
  if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `expected a function, got ${typeof fn}`)
  const { atMostMs, atLeastMs } = parseRunOnceOptions(options)
  if (!claims)
    throw new InvalidArgumentError(
      'runOnce',
      `the ${backendName} backend has no run-once claims (redis, postgres and mysql have)`,
    )

  const sentAt = performance.now()
  const claim = await claims.claim(name, atMostMs)
  if (!claim) return { ran: false }

  const controller = new AbortController()
  // The store started the claim at or after sentAt, so this local deadline is never late.
  const expiry = setTimeout(
    () =>
      controller.abort(
        new LockLostError(name, `lockAtMostFor (${atMostMs} ms) has passed: another instance may run the job now`),
      ),
    Math.max(0, sentAt + atMostMs - leaseMarginMs(atMostMs) - performance.now()),
  )
  expiry.unref()
  let value: T
  try {
    value = await fn({ signal: controller.signal })
  } catch (error) {
    clearTimeout(expiry)
    await claim.finish(atLeastMs).catch(() => {})
    throw error
  }
  clearTimeout(expiry)
  try {
    await claim.finish(atLeastMs)
    return { ran: true, value }
  } catch (error) {
    return { ran: true, value, finishError: error as Error }
  }
}

function renamed(argument: string, check: () => unknown): void {
  try {
    check()
  } catch (error) {
    if (error instanceof InvalidArgumentError)
      throw new InvalidArgumentError(argument, error.message.replace(/^key: /, ''))
    throw error
  }
}
