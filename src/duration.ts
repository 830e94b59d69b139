import { InvalidArgumentError } from './errors.js'

/** A duration: milliseconds as a number, or a string such as `'250ms'`, `'30s'`, `'5m'`, `'1h'`, `'1d'`. */
export type Duration = number | string

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const DURATION_PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/

/**
 * Parses a duration into whole milliseconds. `argument` names the option in the error.
 * `allowZero` is for options where 0 means "off" (staleTtl, timeouts).
 */
export function parseDuration(argument: string, value: Duration, allowZero = false): number {
  let ms: number
  if (typeof value === 'number') {
    ms = value
  } else if (typeof value === 'string') {
    const match = DURATION_PATTERN.exec(value)
    if (!match) throw new InvalidArgumentError(argument, `cannot parse duration ${JSON.stringify(value)}; use milliseconds or a string like '500ms', '30s', '5m'`)
    ms = Number(match[1]) * UNIT_MS[match[2] ?? 'ms']!
  } else {
    throw new InvalidArgumentError(argument, `expected milliseconds or a duration string, got ${typeof value}`)
  }
  if (!Number.isFinite(ms)) throw new InvalidArgumentError(argument, `must be a finite duration, got ${String(value)}`)
  if (ms < 0 || (!allowZero && ms === 0)) {
    throw new InvalidArgumentError(argument, `must be ${allowZero ? 'zero or positive' : 'positive'}, got ${String(value)}`)
  }
  return Math.round(ms)
}

/** The longest delay Node's timers honour (2^31 − 1 ms, about 24.8 days); a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1

/** `parseDuration` for a duration that backs a timer: also rejects values above {@link MAX_TIMER_MS}. */
export function parseTimerDuration(argument: string, value: Duration, allowZero = false): number {
  const ms = parseDuration(argument, value, allowZero)
  if (ms > MAX_TIMER_MS) throw new InvalidArgumentError(argument, `must be at most ${MAX_TIMER_MS} ms (about 24.8 days; Node's timer limit), got ${String(value)}`)
  if (!allowZero && ms === 0) throw new InvalidArgumentError(argument, `must be at least 1 ms, got ${String(value)}`)
  return ms
}
