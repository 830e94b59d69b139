import { InvalidArgumentError } from './errors.js'

/*
 * Options that count things (budgets, rates, sizes), for the cache and the lock alike.
 */

/** `value` if a positive integer, else `InvalidArgumentError` naming `argument`. */
export function positiveInteger(argument: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new InvalidArgumentError(argument, `must be a positive integer, got ${String(value)}`)
  }
  return value
}
