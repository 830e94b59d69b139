import { headerOf, parseHttpDate, type HeaderList } from './headers.js'

/**
 * Age (RFC 9111 §4.2.3, §5.1), framework-free: how old a response already was when the
 * cache received it, and how old it is now. Freshness is its lifetime minus this age, and
 * the `Age` sent with a stored response is this age, not the time since storing.
 */

/** When the cache sent the request on (the handler started) and received the response (it ended), ms since the epoch. */
export interface Exchanged {
  requestTime?: number
  responseTime?: number
}

/**
 * The `Age` field's value in seconds: its first member (a list is read as RFC 9111 §5.1
 * says), 0 when absent or invalid (anything but a non-negative integer is ignored).
 */
export function ageValue(headers: HeaderList): number {
  const first = headerOf(headers, 'age')?.split(',')[0]?.trim()
  return first !== undefined && /^\d+$/.test(first) ? Number(first) : 0
}

/**
 * `corrected_initial_age` in ms: the larger of the apparent age (`response_time −
 * Date`, never negative) and the corrected `Age` (`Age + response_delay`).
 */
export function initialAgeMs(headers: HeaderList, times: Exchanged): number {
  const responseTime = times.responseTime ?? Date.now()
  const date = parseHttpDate(headerOf(headers, 'date'), responseTime)
  const apparent = Number.isNaN(date) ? 0 : Math.max(0, responseTime - date)
  const responseDelay = Math.max(0, responseTime - (times.requestTime ?? responseTime))
  return Math.max(apparent, ageValue(headers) * 1000 + responseDelay)
}

/** `current_age` in whole seconds: the initial age plus the time resident in the cache. */
export function currentAgeSeconds(initialAge: number, storedAt: number, now = Date.now()): number {
  return Math.max(0, Math.floor((initialAge + now - storedAt) / 1000))
}
