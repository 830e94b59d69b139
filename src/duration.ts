import { InvalidArgumentError } from './errors.js'

/** A duration: milliseconds as a number, or a string such as `'250ms'`, `'30s'`, `'5m'`, `'1h'`, `'1d'`. */
export type Duration = number | string

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const DURATION_PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/

/**
 * The longest duration a Node timer can wait: a `setTimeout` above 2³¹−1 ms (about 24.8
 * days) fires after 1 ms instead. Every duration that arms a timer is capped here.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * The longest lifetime an entry may be stored with (`ttl`, `staleTtl`, `staleIfError`,
 * `negativeTtl`, `passFor`, `maxTtl`): 365 days. Lifetimes are not timers, but Redis
 * takes them as absolute expiries, and an absurd one (1e20 ms) would fail halfway
 * through a script. A year is longer than any cache entry should live unrevalidated.
 */
export const MAX_LIFETIME_MS = 365 * UNIT_MS.d!

/**
 * Options (by their last name segment: `cacheRoute.ttl` is `ttl`) that are lifetimes,
 * stored in Redis and compared against clocks, not waited for with a timer. Every
 * other duration is timer-backed and capped at {@link MAX_TIMER_MS}.
 */
const LIFETIMES = new Set(['ttl', 'staleTtl', 'staleIfError', 'negativeTtl', 'passFor', 'maxTtl', 'hitForMiss'])

/** The largest value accepted for the option named `argument`. */
export function maxDurationOf(argument: string): number {
  return LIFETIMES.has(argument.slice(argument.lastIndexOf('.') + 1)) ? MAX_LIFETIME_MS : MAX_TIMER_MS
}

/**
 * Parses a duration into whole milliseconds: the one validator of every duration option.
 * `argument` names the option in the error, and picks its upper bound ({@link maxDurationOf}).
 * `allowZero` is for options where 0 means "off" (staleTtl, timeouts). A value that rounds
 * to 0 ms (`0.4`, `'0.3ms'`) is rejected: it is neither "off" nor a usable duration.
 */
export function parseDuration(argument: string, value: Duration, allowZero = false): number {
  let ms: number
  if (typeof value === 'number') {
    ms = value
  } else if (typeof value === 'string') {
    const match = DURATION_PATTERN.exec(value)
    if (!match)
      throw new InvalidArgumentError(
        argument,
        `cannot parse duration ${JSON.stringify(value)}; use milliseconds or a string like '500ms', '30s', '5m'`,
      )
    ms = Number(match[1]) * UNIT_MS[match[2] ?? 'ms']!
  } else {
    throw new InvalidArgumentError(argument, `expected milliseconds or a duration string, got ${typeof value}`)
  }
  if (!Number.isFinite(ms)) throw new InvalidArgumentError(argument, `must be a finite duration, got ${String(value)}`)
  if (ms < 0 || (!allowZero && ms === 0)) {
    throw new InvalidArgumentError(
      argument,
      `must be ${allowZero ? 'zero or positive' : 'positive'}, got ${String(value)}`,
    )
  }
  const rounded = Math.round(ms)
  if (rounded === 0 && ms > 0) {
    throw new InvalidArgumentError(
      argument,
      `${String(value)} rounds to 0 ms; use at least 1 ms${allowZero ? ', or 0 for off' : ''}`,
    )
  }
  const max = maxDurationOf(argument)
  if (rounded > max) {
    const why = max === MAX_TIMER_MS ? 'the longest a Node timer can wait' : 'the longest lifetime stored'
    throw new InvalidArgumentError(
      argument,
      `${String(value)} is above ${max} ms (${Math.floor(max / UNIT_MS.d!)} days), ${why}`,
    )
  }
  return rounded
}
