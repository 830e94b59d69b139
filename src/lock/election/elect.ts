import { MAX_TIMER_MS } from '../../duration.js'
import { InvalidArgumentError, LockBusyError, LockLostError, LocksClosedError } from '../../errors.js'
import { delay, nextBackoff } from '../../timers.js'
import type { LockHandle } from '../handle.js'
import { linkedSignal } from '../linked-signal.js'
import type { ElectSettings, Leadership } from './options.js'

/** Pause before campaigning again after a store failure: doubles from here, jittered, up to the cap. */
const RETRY_FIRST_MS = 100
const RETRY_MAX_MS = 2_000
/**
 * After a term, a candidate with `onElected` waits this long (jittered up to twice) before
 * campaigning again, so a candidate already waiting takes over: Redis does not queue
 * candidates, and the one that just resigned would otherwise win the race every time.
 */
const RECAMPAIGN_PAUSE_MS = 50

/** What `elect` needs of the `Locks` it runs in. */
export interface Campaigner {
  /** Takes the election's lock for `name`, waiting up to `waitMs`: the handle, or rejects (`LockBusyError` when the wait ran out). */
  take(name: string, leaseMs: number, waitMs: number, signal: AbortSignal, label: string): Promise<LockHandle<unknown>>
  /** Tells observers of the new leader (best effort). */
  announce(name: string): Promise<void>
  /** Aborted by `close()`. */
  readonly closing: AbortSignal
}

/**
 * Campaigns until this candidate leads, then resolves its `Leadership`. Store failures
 * while campaigning (a restart, a failover, a lost session) do not end the campaign: each
 * is reported as a `backend-error` event and the candidate campaigns again, backed off
 * 100 ms → 2 s. Only `signal`, `close()` and bad input end it. With `onElected`, the
 * candidacy goes on after the first term, in the background (see `ElectOptions.onElected`).
 */
export async function elect(name: string, settings: ElectSettings, campaigner: Campaigner): Promise<Leadership> {
  const first = await campaign(name, settings, campaigner)
  if (settings.onElected) void serve(first, name, settings, campaigner)
  return first
}

async function campaign(name: string, settings: ElectSettings, campaigner: Campaigner): Promise<Leadership> {
  const linked = settings.signal ? linkedSignal([settings.signal, campaigner.closing]) : undefined
  try {
    return await campaignUntil(name, settings, campaigner, linked?.signal ?? campaigner.closing)
  } finally {
    linked?.dispose()
  }
}

async function campaignUntil(
  name: string,
  settings: ElectSettings,
  campaigner: Campaigner,
  signal: AbortSignal,
): Promise<Leadership> {
  let pauseMs = RETRY_FIRST_MS
  for (;;) {
    if (signal.aborted) throw signal.reason
    let handle: LockHandle<unknown>
    try {
      handle = await campaigner.take(name, settings.leaseMs, MAX_TIMER_MS, signal, settings.id)
    } catch (error) {
      if (signal.aborted || error instanceof InvalidArgumentError || error instanceof LocksClosedError) throw error
      if (!(error instanceof LockBusyError)) {
        const pause = delay(pauseMs)
        const onAbort = () => pause.cancel()
        signal.addEventListener('abort', onAbort, { once: true })
        await pause.promise.finally(() => signal.removeEventListener('abort', onAbort))
        pauseMs = nextBackoff(pauseMs, RETRY_MAX_MS)
      }
      continue
    }
    await campaigner.announce(name).catch(() => {})
    return leadershipOf(name, settings.id, handle)
  }
}

function leadershipOf(name: string, id: string, handle: LockHandle<unknown>): Leadership {
  const resign = () => handle.release()
  return {
    name,
    id,
    term: handle.token,
    signal: handle.signal,
    get leading() {
      if (handle.ended) return false
      const until = handle.validUntil
      if (until !== undefined && performance.now() >= until) {
        handle.lose(new LockLostError(name, "the leadership's lease ran out by this process's clock"))
        return false
      }
      return true
    },
    resign,
    [Symbol.asyncDispose]: resign,
  }
}

/** The terms of a candidacy with `onElected`: one at a time, each resigned once its work settles. */
async function serve(first: Leadership, name: string, settings: ElectSettings, campaigner: Campaigner): Promise<void> {
  for (let leadership = first; ;) {
    try {
      await settings.onElected!(leadership)
    } catch (error) {
      process.emitWarning(
        `stampede-guard elect: onElected of "${name}" (term ${leadership.term}) failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
        { code: 'SG_ELECTION_LEADER_FAILED' },
      )
    }
    await leadership.resign().catch(() => {})
    await delay(RECAMPAIGN_PAUSE_MS * (1 + Math.random())).promise
    try {
      leadership = await campaign(name, settings, campaigner)
    } catch {
      return // signal or close(): the candidacy is over
    }
  }
}
