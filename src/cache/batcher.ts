import { InvalidArgumentError } from '../errors.js'
import type { CallOptions } from '../options.js'
import type { BatchLoader } from './batch-loads.js'
import type { ManyResult } from './load-many.js'

/** `cache.batcher`'s options: the call options of each `getOrLoadMany` it makes, and its batch size. */
export interface BatcherOptions extends CallOptions {
  /**
   * Most keys in one batch (default 1000, at most 10,000): the keys of one tick past it go
   * out as further `getOrLoadMany` calls, in the same tick.
   */
  maxBatchSize?: number
}

/** A DataLoader-style front on `getOrLoadMany`: the `load`s of one tick go out as one batch. */
export interface Batcher<V> {
  /**
   * The value of `key`, as `getOrLoad` would give it; the keys asked for in the same tick of
   * the event loop share one `getOrLoadMany` (a key asked for twice in a tick is asked once),
   * so the loads they need are one call of the batch loader. Rejects with that key's error
   * alone (a bad key: `InvalidArgumentError`, nothing sent).
   */
  load(key: string): Promise<V>
}

type GetOrLoadMany<V> = (
  keys: string[],
  batchLoader: BatchLoader<V>,
  options: CallOptions,
) => Promise<Map<string, ManyResult<V>>>

const DEFAULT_BATCH_SIZE = 1000
const MAX_BATCH_SIZE = 10_000

interface Waiting<V> {
  promise: Promise<V>
  resolve(value: V): void
  reject(error: unknown): void
}

/**
 * Builds `cache.batcher(batchLoader, options)`: options are checked once here (`check` throws
 * `InvalidArgumentError` naming the bad one); each key through `checkKey` on `load`.
 */
export function createBatcher<V>(
  getOrLoadMany: GetOrLoadMany<V>,
  check: (options: CallOptions) => void,
  checkKey: (key: string) => void,
  batchLoader: BatchLoader<V>,
  options: BatcherOptions = {},
): Batcher<V> {
  if (typeof batchLoader !== 'function')
    throw new InvalidArgumentError('batchLoader', `must be a function, got ${typeof batchLoader}`)
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('options', 'must be an object')
  const { maxBatchSize = DEFAULT_BATCH_SIZE, ...callOptions } = options
  if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1 || maxBatchSize > MAX_BATCH_SIZE)
    throw new InvalidArgumentError(
      'maxBatchSize',
      `must be an integer from 1 to ${MAX_BATCH_SIZE}, got ${maxBatchSize}`,
    )
  if (callOptions.forceRefresh) throw new InvalidArgumentError('forceRefresh', 'is not supported by a batcher')
  check(callOptions)
  let pending: Map<string, Waiting<V>> | undefined

  const dispatch = (batch: Map<string, Waiting<V>>) => {
    const keys = [...batch.keys()]
    for (let from = 0; from < keys.length; from += maxBatchSize) {
      const chunk = keys.slice(from, from + maxBatchSize)
      getOrLoadMany(chunk, batchLoader, callOptions).then(
        (results) => {
          for (const key of chunk) {
            const result = results.get(key)!
            if (result.status === 'fulfilled') batch.get(key)!.resolve(result.value)
            else batch.get(key)!.reject(result.reason)
          }
        },
        (error: unknown) => {
          for (const key of chunk) batch.get(key)!.reject(error)
        },
      )
    }
  }

  return {
    load(key: string): Promise<V> {
      try {
        checkKey(key)
      } catch (error) {
        return Promise.reject(error)
      }
      if (!pending) {
        const batch = (pending = new Map())
        // After the promise jobs of this tick, as DataLoader does: loads asked for after an await in this tick join too.
        void Promise.resolve().then(() =>
          process.nextTick(() => {
            pending = undefined
            dispatch(batch)
          }),
        )
      }
      const waiting = pending.get(key)
      if (waiting) return waiting.promise
      let settle: Pick<Waiting<V>, 'resolve' | 'reject'> | undefined
      const promise = new Promise<V>((resolve, reject) => (settle = { resolve, reject }))
      pending.set(key, { promise, ...settle! })
      return promise
    },
  }
}
