import type { LockEmitter } from './events.js'
import { parseDuration, type Duration } from '../duration.js'
import { InvalidArgumentError, LockLostError } from '../errors.js'
import type { Claim, ClaimStore } from './backend.js'
import { MIN_LEASE_MS, namedKey, orDefault } from './options.js'
import { LeaseWatchdog, leaseMarginMs } from '../lease/watchdog.js'

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
  /**
   * Renew the claim while the job runs, every lockAtMostFor/3 through the lock watchdog
   * (compare-and-extend by the store's clock: a claim that ran out or was taken over is
   * never taken back), so a job longer than `lockAtMostFor` does not run twice.
   * `lockAtMostFor` stays the crash bound: an instance that dies mid-run blocks the job for
   * at most that long after its last renewal. `signal` aborts with `LockLostError` when a
   * renewal could not be confirmed in time. Redis, PostgreSQL, MariaDB/MySQL. Default `false`.
   */
  keepAlive?: boolean
}

/** What the job receives. */
export interface RunOnceContext {
  /**
   * Aborts with `LockLostError` once `lockAtMostFor` has passed (by this process's clock,
   * minus a margin); with `keepAlive`, once a renewal could not be confirmed within it.
   */
  readonly signal: AbortSignal
  /**
   * ms left before `signal` aborts, by the monotonic clock read now: 0 once the claim's local
   * deadline has passed, even in the first instant after a pause (SIGSTOP, GC) when no timer
   * has run yet and `signal.aborted` is still `false`.
   */
  readonly validForMs: number
  /**
   * Throws `LockLostError` unless the claim is still this instance's by {@link validForMs}
   * (and aborts `signal` then): call it right before a side effect no fence protects.
   */
  assertHeld(): void
}

/**
 * `ran: true` with the job's result when this instance ran it; `ran: false` when another
 * instance's claim on this tick is still live (skipped at once, without waiting).
 * `finishError`: the claim could not be ended after the run, so it stands until
 * `lockAtMostFor` (the job does not run again sooner; nothing is lost).
 */
export type RunOnceResult<T> = { ran: true; value: T; finishError?: Error } | { ran: false }

const OPTION_NAMES = new Set(['lockAtMostFor', 'lockAtLeastFor', 'keepAlive'])

export interface RunOnceSettings {
  atMostMs: number
  atLeastMs: number
  keepAlive: boolean
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
  const keepAlive = orDefault(options.keepAlive, false)
  if (typeof keepAlive !== 'boolean')
    throw new InvalidArgumentError('keepAlive', `expected a boolean, got ${typeof keepAlive}`)
  if (keepAlive && atMostMs < MIN_LEASE_MS)
    throw new InvalidArgumentError('lockAtMostFor', `must be at least ${MIN_LEASE_MS} ms with keepAlive`)
  return { atMostMs, atLeastMs, keepAlive }
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
  /** The `Locks`' close(): it ends the run's claim here (signal aborted, no more renewals). */
  closing: AbortSignal,
  /**
   * The front's events, as for a mutex keyed by `name`: a claim taken is `acquired`, one
   * held elsewhere `busy`; the claim ends `released` when the run ends, or `lost` when its
   * `signal` aborted first (lockAtMostFor passed, a renewal failed, `close()`).
   */
  events?: LockEmitter,
): Promise<RunOnceResult<T>> {
  namedKey('name', name, maxKeyLength)
  if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `expected a function, got ${typeof fn}`)
  const { atMostMs, atLeastMs, keepAlive } = parseRunOnceOptions(options)
  if (!claims)
    throw new InvalidArgumentError(
      'runOnce',
      `the ${backendName} backend has no run-once claims (redis, postgres and mysql have)`,
    )

  const sentAt = performance.now()
  const claim = await claims.claim(name, atMostMs)
  const report = (event: 'acquired' | 'busy') => {
    if (events?.listening(event))
      events.emit(event, { key: name, backend: backendName, waitedMs: performance.now() - sentAt })
  }
  if (!claim) {
    report('busy')
    return { ran: false }
  }
  report('acquired')
  const acquiredAt = performance.now()
  if (keepAlive && !claim.extend) {
    await claim.finish(0).catch(() => {})
    throw new InvalidArgumentError('keepAlive', `the ${backendName} backend cannot extend a run-once claim`)
  }
  // The store started the claim at or after sentAt, so a deadline counted from it is never late.
  const end = keepAlive ? renewedClaim(name, claim, atMostMs, sentAt) : claimDeadline(name, atMostMs, sentAt)
  // close() ends the hold as it does a lock's: the job is told to stop and nothing renews the
  // claim, which then stands until lockAtMostFor (the crash bound) unless the run ends first.
  const onClose = () => end.lose('close() was called')
  const onLost = () => {
    if (events?.listening('lost'))
      events.emit('lost', {
        key: name,
        backend: backendName,
        heldMs: performance.now() - acquiredAt,
        reason: (end.signal.reason as LockLostError).reason,
      })
  }
  end.signal.addEventListener('abort', onLost, { once: true })
  const onEnd = () => {
    end.signal.removeEventListener('abort', onLost)
    if (!end.signal.aborted && events?.listening('released'))
      events.emit('released', { key: name, backend: backendName, heldMs: performance.now() - acquiredAt })
  }
  if (closing.aborted) onClose()
  else closing.addEventListener('abort', onClose, { once: true })
  let value: T
  try {
    value = await fn({
      signal: end.signal,
      assertHeld: () => end.assertHeld(),
      get validForMs() {
        return end.validForMs
      },
    })
  } catch (error) {
    closing.removeEventListener('abort', onClose)
    await end.stop()
    onEnd()
    await claim.finish(atLeastMs).catch(() => {})
    throw error
  }
  closing.removeEventListener('abort', onClose)
  await end.stop()
  onEnd()
  try {
    await claim.finish(atLeastMs)
    return { ran: true, value }
  } catch (error) {
    return { ran: true, value, finishError: error as Error }
  }
}

interface ClaimEnd {
  readonly signal: AbortSignal
  /** ms left before the local deadline, by the clock read now (0 once lost). */
  readonly validForMs: number
  /** Throws `LockLostError` once lost or past the local deadline (aborting `signal` then). */
  assertHeld(): void
  /** No more renewals (waiting for one in flight) and no abort from here on. */
  stop(): Promise<void>
  /** Ends the hold now: no more renewals, and `signal` aborts with `LockLostError(reason)`. */
  lose(reason: string): void
}

/** Without keepAlive: the job's signal aborts when lockAtMostFor has passed, by this process's clock minus a margin. */
function claimDeadline(name: string, atMostMs: number, sentAt: number): ClaimEnd {
  const controller = new AbortController()
  const lose = (reason: string) => {
    clearTimeout(expiry)
    if (!controller.signal.aborted) controller.abort(new LockLostError(name, reason))
  }
  const deadline = sentAt + atMostMs - leaseMarginMs(atMostMs)
  const passed = `lockAtMostFor (${atMostMs} ms) has passed: another instance may run the job now`
  const expiry = setTimeout(() => lose(passed), Math.max(0, deadline - performance.now()))
  expiry.unref()
  return {
    signal: controller.signal,
    get validForMs() {
      return controller.signal.aborted ? 0 : Math.max(0, deadline - performance.now())
    },
    assertHeld() {
      // Read the clock: after a pause the expiry timer may not have run yet.
      if (performance.now() >= deadline) lose(passed)
      if (controller.signal.aborted) throw controller.signal.reason
    },
    stop: async () => clearTimeout(expiry),
    lose,
  }
}

/** With keepAlive: the lock watchdog renews the claim every lockAtMostFor/3 and aborts the signal at its local deadline. */
function renewedClaim(name: string, claim: Claim, atMostMs: number, sentAt: number): ClaimEnd {
  const watchdog = new LeaseWatchdog({
    key: name,
    leaseMs: atMostMs,
    startedAt: sentAt,
    renew: (ms) => claim.extend!(ms),
  })
  return {
    signal: watchdog.signal,
    get validForMs() {
      return watchdog.validForMs
    },
    assertHeld: () => watchdog.assertHeld(),
    stop: () => watchdog.stop(),
    lose: (reason) => watchdog.lose(reason),
  }
}
