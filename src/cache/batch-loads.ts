import type { LoaderContext } from '../context.js'
import { BatchResultError } from '../errors.js'

/** What a batch loader receives besides its keys. */
export interface BatchLoaderContext {
  /**
   * Aborts once every key of this batch has lost its lock (a renewal failed, or
   * `lock.maxHold` passed): no result of the batch can be stored any more.
   */
  readonly signal: AbortSignal
}

/**
 * `getOrLoadMany`'s loader: loads `keys` (only those that need loading, each once) in one call.
 * Returns a Map from key to value, or an array with one value per key in the order of `keys`.
 * A key missing from the Map fails alone (`BatchResultError`, reason `'missing'`); an `Error`
 * as a key's value fails that key alone with it; a throw or rejection fails the batch's keys.
 * As for `getOrLoad`, `undefined` is not stored (return `null` to cache "nothing").
 */
export type BatchLoader<V> = (keys: string[], context: BatchLoaderContext) => BatchResult<V> | Promise<BatchResult<V>>

/** A batch loader's result: by key, or aligned with the keys it was given; an `Error` fails its key alone. */
export type BatchResult<V> = ReadonlyMap<string, V | Error> | readonly (V | Error)[]

interface PendingLoad {
  key: string
  signal: AbortSignal
  resolve(value: unknown): void
  reject(error: unknown): void
}

/**
 * How many turns of the event loop a batch waits, once its lookups are answered, for the keys
 * whose lock they won and whose loaders have not been called yet (a background refresh starts
 * a turn later; a loader waiting for a `loaderConcurrency` permit may never come in time).
 */
const MAX_WAIT_TURNS = 4

/**
 * The loads of one getOrLoadMany call, gathered into batch-loader calls. Each key's flight
 * calls `load(key, context)` as its loader when (and only when) it is the one to load the
 * key. The loads go to the batch loader as one call once no lookup of the batch is still
 * unanswered (each is bounded by `redisTimeout`) and every key whose lookup won the lock has
 * asked for its load, or MAX_WAIT_TURNS turns of the event loop after that. A load asked for
 * later (a wait that timed out and loads) is the first of the next batch.
 */
export class BatchLoads<V> {
  private pending: PendingLoad[] = []
  /** Keys whose lookup won the lock and whose load has not been asked for yet. */
  private readonly expected = new Set<string>()
  /** Keys sent in lookups not answered yet (they may win their lock). */
  private undecided = 0
  private scheduled = false
  private turns = 0

  /** `order`: each key's place in the call's keys: a batch lists its keys in that order. */
  constructor(
    private readonly batchLoader: BatchLoader<V>,
    private readonly order?: ReadonlyMap<string, number>,
  ) {}

  /** `count` keys are being looked up: their lookups' answers are waited for before a batch goes. */
  lookingUp(count: number): void {
    this.undecided += count
  }

  /** A lookup of `count` keys was answered (or failed): of them, `won` took their locks, so their loads are coming. */
  decided(count: number, won: readonly string[]): void {
    this.undecided -= count
    for (const key of won) this.expected.add(key)
    this.schedule()
  }

  /** A key's loader: resolves with its value from the next batch-loader call. */
  load(key: string, context: LoaderContext<unknown>): Promise<unknown> {
    this.expected.delete(key)
    return new Promise((resolve, reject) => {
      this.pending.push({ key, signal: context.signal, resolve, reject })
      this.schedule()
    })
  }

  private schedule(): void {
    if (this.scheduled || this.pending.length === 0) return
    this.scheduled = true
    setImmediate(() => this.turn())
  }

  private turn(): void {
    this.scheduled = false
    if (this.undecided > 0) return // decided() schedules the next turn
    if (this.expected.size > 0 && ++this.turns < MAX_WAIT_TURNS) return this.schedule()
    this.expected.clear()
    this.turns = 0
    const loads = this.pending
    this.pending = []
    void this.dispatch(loads)
  }

  /** One batch-loader call for `loads` (a key asked for twice is loaded once); each load settles with its own value. */
  private async dispatch(loads: PendingLoad[]): Promise<void> {
    const keys = [...new Set(loads.map((load) => load.key))]
    const order = this.order
    if (order) keys.sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0))
    let result: BatchResult<V>
    try {
      result = await this.batchLoader(keys, { signal: allAborted(loads.map((load) => load.signal)) })
    } catch (error) {
      for (const load of loads) load.reject(error)
      return
    }
    const values = valuesByKey(keys, result)
    for (const load of loads) {
      const value = values.get(load.key)
      if (value instanceof Error) load.reject(value)
      else load.resolve(value)
    }
  }
}

/** Each key's value (or the error that fails it) from a batch loader's result. */
function valuesByKey<V>(keys: string[], result: BatchResult<V>): Map<string, unknown> {
  const values = new Map<string, unknown>()
  if (result instanceof Map) {
    for (const key of keys)
      values.set(
        key,
        result.has(key) ? result.get(key) : new BatchResultError(key, 'missing', 'the Map returned has no such key'),
      )
  } else if (Array.isArray(result) && result.length === keys.length) {
    keys.forEach((key, i) => values.set(key, result[i]))
  } else {
    const got = Array.isArray(result) ? `an array of ${result.length} items for ${keys.length} keys` : typeof result
    for (const key of keys)
      values.set(
        key,
        new BatchResultError(key, 'malformed', `expected a Map or an array of one value per key, got ${got}`),
      )
  }
  return values
}

/** A signal that aborts once all of `signals` have (one that never aborts keeps it from aborting). */
function allAborted(signals: AbortSignal[]): AbortSignal {
  const controller = new AbortController()
  let left = signals.length
  const onAbort = (signal: AbortSignal) => {
    if (--left === 0) controller.abort(signal.reason)
  }
  for (const signal of signals) {
    if (signal.aborted) onAbort(signal)
    else signal.addEventListener('abort', () => onAbort(signal), { once: true })
  }
  return controller.signal
}
