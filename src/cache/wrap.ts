import { InvalidArgumentError } from '../errors.js'
import type { CallOptions } from '../options.js'

/** `cache.wrap`'s options: how to name a call's entry, and the options of each `getOrLoad` it makes. */
export interface WrapOptions<A extends unknown[]> extends CallOptions {
  /**
   * The cache key of one call, from its arguments (required). Calls whose keys are equal
   * share one entry, so the key must name everything the result depends on. A key it
   * returns is checked as `getOrLoad`'s is: a bad one rejects that call with
   * `InvalidArgumentError` (argument `key`) and `fn` is not run.
   */
  key: (...args: A) => string
}

/** The cached function `wrap` returns: `fn`'s arguments and result, each call through `getOrLoad`. */
export type Wrapped<A extends unknown[], R> = (...args: A) => Promise<Awaited<R>>

type GetOrLoad = (key: string, loader: () => unknown, options: CallOptions) => Promise<unknown>

/**
 * Builds `cache.wrap(fn, options)`: the options are checked once, here (`check` throws
 * `InvalidArgumentError` naming the bad one), so a wrapped function never fails on them later.
 */
export function wrapFunction<A extends unknown[], R>(
  getOrLoad: GetOrLoad,
  check: (options: CallOptions) => void,
  fn: (...args: A) => R | Promise<R>,
  options: WrapOptions<A>,
): Wrapped<A, R> {
  if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `must be a function, got ${typeof fn}`)
  if (typeof options !== 'object' || options === null)
    throw new InvalidArgumentError('options', 'must be an object with at least { key: (...args) => string }')
  const { key: keyOf, ...callOptions } = options
  if (typeof keyOf !== 'function')
    throw new InvalidArgumentError('options.key', `must be a function of the arguments, got ${typeof keyOf}`)
  check(callOptions)
  return (...args: A) => {
    let key: string
    try {
      key = keyOf(...args)
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)))
    }
    return getOrLoad(key, () => fn(...args), callOptions) as Promise<Awaited<R>>
  }
}
