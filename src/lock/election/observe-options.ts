import { InvalidArgumentError } from '../../errors.js'

export interface ObserveOptions {
  /** Ends the observation when aborted. */
  signal?: AbortSignal
  /** Receives each failed read of the store (the observer retries, 100 ms → 2 s, keeping the last reading). Default: none. */
  onError?: (error: unknown) => void
}

const OBSERVE_KEYS = new Set(['signal', 'onError'])

export function parseObserve(options: ObserveOptions | undefined): ObserveOptions {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object')
    throw new InvalidArgumentError('options', `expected an object, got ${options === null ? 'null' : typeof options}`)
  for (const key of Object.keys(options))
    if (!OBSERVE_KEYS.has(key))
      throw new InvalidArgumentError(key, `unknown observe option (known: ${[...OBSERVE_KEYS].join(', ')})`)
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal))
    throw new InvalidArgumentError('signal', 'expected an AbortSignal')
  if (options.onError !== undefined && typeof options.onError !== 'function')
    throw new InvalidArgumentError('onError', `expected a function, got ${typeof options.onError}`)
  return options
}
