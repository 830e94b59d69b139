import type { Duration } from '../../duration.js'
import { InvalidArgumentError } from '../../errors.js'
import { namedKey, parseLease } from '../options.js'
import { LeaseWatchdog } from '../../lease/watchdog.js'
import type { LockEmitter } from '../events.js'
import type { CoalesceStore } from './store.js'

export interface CoalesceOptions {
  /**
   * How long the runner's claim outlives a runner that died: the longest a crash keeps the
   * job from running again. Renewed every lease/3 while a run goes on. Milliseconds or
   * `'30s'`; default: the `createLocks` lease (`'5s'`).
   */
  lease?: Duration
}

/** What each run of a coalesced job receives. */
export interface CoalesceContext {
  /** 0 for the run this call started, then 1, 2, … for each run once more. */
  readonly run: number
  /** Aborts with `LockLostError` when this run's claim could not be renewed in time: stop. */
  readonly signal: AbortSignal
  /** ms left before `signal` aborts, by the monotonic clock read now (0 once past, even before any timer ran). */
  readonly validForMs: number
  /** Throws `LockLostError` unless this run's claim is still held by {@link validForMs} (aborting `signal` then). */
  assertHeld(): void
}

/**
 * `ran: true` on the instance that ran the job: `runs` in a row (1 + one per batch of
 * triggers that came while it ran), `value` of the last. `ran: false` when another instance
 * (or another call here) was running it: this trigger is recorded, and that runner runs
 * the job once more after its current run. `finishError`: the store could not be told the
 * last run ended, so its claim stands until its lease runs out, and a trigger that came
 * during that run is run by the first trigger after that.
 */
export type CoalesceResult<T> = { ran: true; runs: number; value: T; finishError?: Error } | { ran: false }

const OPTION_NAMES = new Set(['lease'])

/**
 * Runs `fn` now, then once more after the last trigger that arrived while it ran, never
 * two at once across every instance sharing the store. Each call is a trigger. A run's
 * error ends nothing: the next run still happens if a trigger came; the call settles like
 * its last run (its value, or its error), earlier runs' errors go to `process.emitWarning`.
 */
export async function coalesce<T>(
  store: CoalesceStore | undefined,
  backendName: string,
  name: string,
  fn: (context: CoalesceContext) => T | Promise<T>,
  options: CoalesceOptions | undefined,
  defaults: { leaseMs: number; maxKeyLength: number },
  /** The `Locks`' close(): the run in progress is told to stop, and no run follows it here. */
  closing: AbortSignal,
  /**
   * The front's events, as for a mutex keyed by `name`: the claim taken is `acquired`, a
   * trigger that found the job running is `busy`; the claim ends `released` after the last
   * run, or `lost` the first time a run's claim could not be renewed in time.
   */
  events?: LockEmitter,
): Promise<CoalesceResult<T>> {
  namedKey('name', name, defaults.maxKeyLength)
  if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `expected a function, got ${typeof fn}`)
  if (options !== undefined && (options === null || typeof options !== 'object'))
    throw new InvalidArgumentError('options', 'expected { lease? }')
  for (const key of Object.keys(options ?? {}))
    if (!OPTION_NAMES.has(key)) throw new InvalidArgumentError(key, 'unknown coalesce option (known: lease)')
  const leaseMs = options?.lease === undefined ? defaults.leaseMs : parseLease('lease', options.lease)
  if (!store) throw new InvalidArgumentError('coalesce', `the ${backendName} backend has no coalesced runs (redis has)`)

  const calledAt = performance.now()
  const run = await store.begin(name, leaseMs)
  if (!run) {
    if (events?.listening('busy'))
      events.emit('busy', { key: name, backend: backendName, waitedMs: performance.now() - calledAt })
    return { ran: false }
  }
  const acquiredAt = performance.now()
  if (events?.listening('acquired'))
    events.emit('acquired', { key: name, backend: backendName, waitedMs: acquiredAt - calledAt })
  let lost = false
  const onLost = (error: { reason: string }) => {
    if (lost) return
    lost = true
    if (events?.listening('lost'))
      events.emit('lost', {
        key: name,
        backend: backendName,
        heldMs: performance.now() - acquiredAt,
        reason: error.reason,
      })
  }
  let startedAt = run.startedAt
  let outcome: { ok: true; value: T } | { ok: false; error: unknown }
  let finishError: Error | undefined
  let runs = 0
  for (let index = 0; ; index++) {
    runs++
    // A watchdog per run: a run that lost its lease aborts its own signal, not the next run's.
    const watchdog = new LeaseWatchdog({ key: name, leaseMs, startedAt, renew: (ms) => run.renew(ms), onLost })
    const onClose = () => watchdog.lose('close() was called')
    if (closing.aborted) onClose()
    else closing.addEventListener('abort', onClose, { once: true })
    try {
      const context: CoalesceContext = {
        run: index,
        signal: watchdog.signal,
        get validForMs() {
          return watchdog.validForMs
        },
        assertHeld: () => watchdog.assertHeld(),
      }
      outcome = { ok: true, value: await fn(context) }
    } catch (error) {
      outcome = { ok: false, error }
    }
    closing.removeEventListener('abort', onClose)
    await watchdog.stop() // no renewal in flight may race the finish
    if (watchdog.lost) onLost(watchdog.lost)
    // Finished even after a loss: a trigger pending meanwhile is run here (under a fresh claim)
    // unless another runner took the claim, whose finish then sees it.
    const finishSentAt = performance.now()
    const next = await run.finish(leaseMs, !closing.aborted).catch((error: Error) => {
      if (events?.listening('backend-error'))
        events.emit('backend-error', { key: name, backend: backendName, operation: 'release', error })
      return (finishError = error)
    })
    if (next !== 'again') {
      if (!lost && events?.listening('released'))
        events.emit('released', { key: name, backend: backendName, heldMs: performance.now() - acquiredAt })
      break
    }
    startedAt = finishSentAt
    if (!outcome.ok) warn(name, index, outcome.error)
  }
  if (!outcome.ok) throw outcome.error
  return finishError
    ? { ran: true, runs, value: outcome.value, finishError }
    : { ran: true, runs, value: outcome.value }
}

function warn(name: string, index: number, error: unknown): void {
  process.emitWarning(
    `stampede-guard coalesce: run ${index} of "${name}" failed (the next run goes on): ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    { code: 'SG_COALESCE_RUN_FAILED' },
  )
}
