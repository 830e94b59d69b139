import type { Cluster, Redis } from 'ioredis'
import { parseDuration } from '../duration.js'
import { positiveInteger } from '../counts.js'
import { InvalidArgumentError, RedisUnavailableError } from '../errors.js'
import type { DeleteOptions, DurableDeleteOptions } from '../options.js'
import type { CacheCore } from './core.js'
import { entryKeys, type EntryKeys } from './redis/keys.js'
import { ReplayStore } from './redis/replay.js'
import type { Broadcast } from './redis/store.js'

/** What `delete()` resolves to: `'deleted'` once Redis has done it, `'queued'` when it waits in the outbox for Redis. */
export type DeleteOutcome = 'deleted' | 'queued'

/** Default of `durableDeletes.maxQueued`. */
export const DEFAULT_MAX_QUEUED_DELETES = 10_000
/** Default of `durableDeletes.retryInterval`, ms. */
export const DEFAULT_DELETE_RETRY_MS = 1_000
/**
 * Added to this process's estimate of the server clock when a durable delete is asked for, ms:
 * the estimate is off by up to half a round trip plus its drift, and the fence must err on the
 * side of erasing (a value written within it after the delete is erased too: one reload),
 * never on the side of keeping a value loaded before the delete.
 */
const CLOCK_MARGIN_MS = 5
/** Queued deletes replayed at once (the command budget bounds them too); a failed batch ends the replay. */
const REPLAY_BATCH = 32

interface QueuedDelete {
  keys: EntryKeys
  /** Server µs when the delete was asked for: what was written before it is erased, nothing after. */
  beforeMicros: number
  broadcast: Broadcast
}

interface OutboxSettings {
  byDefault: boolean
  maxQueued: number
  retryMs: number
}

const OPTION_KEYS = new Set(['default', 'maxQueued', 'retryInterval'])

function parseOutboxSettings(option: DurableDeleteOptions | undefined): OutboxSettings {
  const settings = { byDefault: false, maxQueued: DEFAULT_MAX_QUEUED_DELETES, retryMs: DEFAULT_DELETE_RETRY_MS }
  if (option === undefined) return settings
  if (option === null || typeof option !== 'object')
    throw new InvalidArgumentError('durableDeletes', 'expected { default?, maxQueued?, retryInterval? }')
  for (const name of Object.keys(option))
    if (!OPTION_KEYS.has(name))
      throw new InvalidArgumentError(
        `durableDeletes.${name}`,
        'unknown option (known: default, maxQueued, retryInterval)',
      )
  settings.byDefault = durableChoice('durableDeletes.default', option.default, false)
  if (option.maxQueued !== undefined) {
    settings.maxQueued = positiveInteger('durableDeletes.maxQueued', option.maxQueued)
    if (settings.maxQueued > 1_000_000)
      throw new InvalidArgumentError(
        'durableDeletes.maxQueued',
        `must be an integer in 1..1000000, got ${option.maxQueued}`,
      )
  }
  if (option.retryInterval !== undefined)
    settings.retryMs = parseDuration('durableDeletes.retryInterval', option.retryInterval)
  return settings
}

function durableChoice(argument: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback
  if (value === 'queue') return true
  if (value === false) return false
  throw new InvalidArgumentError(argument, `must be 'queue' or false, got ${JSON.stringify(value)}`)
}

/**
 * `delete()`, and its outbox: a durable delete that cannot reach Redis waits here, one entry
 * per key (a later delete of the key replaces it, at the end of the line), at most `maxQueued`,
 * and is replayed in order once Redis answers (when the client reconnects, and every
 * `retryInterval` while any wait). Each replay is fenced (invalidate-before.lua): it erases
 * what was written before the delete was asked for, never a value written after it.
 */
export class Deletes {
  readonly #core: CacheCore
  readonly #settings: OutboxSettings
  readonly #replays: ReplayStore | undefined
  readonly #queue = new Map<string, QueuedDelete>()
  readonly #client: (Redis | Cluster) | undefined
  #timer: NodeJS.Timeout | undefined
  #replaying: Promise<void> | undefined
  #closed = false
  #listening = false
  readonly #onReady = () => this.#replaySoon()

  /** @internal */
  constructor(core: CacheCore, client: Redis | Cluster | undefined, option: DurableDeleteOptions | undefined) {
    this.#core = core
    this.#settings = parseOutboxSettings(option)
    if (core.store && client) {
      this.#client = client
      this.#replays = new ReplayStore(client, core.store)
    }
  }

  /**
   * Removes `key` everywhere (see `Cache.delete`). Durable and Redis unreachable: queued,
   * resolves `'queued'`; the outbox full: rejects with `RedisUnavailableError`.
   */
  async delete(key: string, options: DeleteOptions | undefined): Promise<DeleteOutcome> {
    const core = this.#core
    core.call(key, () => undefined, undefined)
    const durable = this.#durable(options)
    core.forget(key)
    const store = core.store
    if (!store) return 'deleted'
    const keys = entryKeys(core.settings.namespace, key)
    // Taken before the attempt: a value another process writes while it fails is newer than this delete.
    const beforeMicros = this.#serverMicros()
    const broadcast = core.forgetMessage(key)
    try {
      // Other processes may hold it in L1 even if this one has none: the script tells them. A durable
      // one is fenced at once: unanswered, it may still run late (ioredis resends it after a
      // reconnect), and then it must not erase a value written after it either.
      if (durable && this.#replays && store.clock.known())
        this.#replayed(
          key,
          await this.#replays.invalidateBefore(keys, beforeMicros, core.retentionMs, broadcast),
          false,
        )
      else await core.invalidations!.invalidate(keys) // with the other deletes of this tick, in one message
    } catch (error) {
      if (!durable || !(error instanceof RedisUnavailableError) || this.#closed) throw error
      return this.#enqueue(key, { keys, beforeMicros, broadcast }, error)
    }
    this.#queue.delete(key) // done now, and later than what was queued for the key: that is superseded
    return 'deleted'
  }

  /** Replays what is queued once more if Redis answers, then drops the rest (`delete-dropped`, reason `closed`). */
  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#listen(false)
    await this.#replaying
    if (this.#queue.size > 0) await this.#replay()
    for (const key of this.#queue.keys()) this.#core.events.emit('delete-dropped', { key, reason: 'closed' })
    this.#queue.clear()
  }

  #durable(options: DeleteOptions | undefined): boolean {
    if (options === undefined) return this.#settings.byDefault
    if (options === null || typeof options !== 'object')
      throw new InvalidArgumentError('options', 'must be an object such as { durable: "queue" }')
    for (const name of Object.keys(options))
      if (name !== 'durable') throw new InvalidArgumentError(`options.${name}`, 'unknown option (known: durable)')
    return durableChoice('durable', options.durable, this.#settings.byDefault)
  }

  /**
   * The server clock now, in µs, as this process estimates it (within half a round trip, plus
   * the drift since it was last measured); the local clock before Redis was ever reached.
   */
  #serverMicros(): number {
    return Math.floor(((this.#core.store?.clock.now() ?? Date.now()) + CLOCK_MARGIN_MS) * 1000)
  }

  #replayed(key: string, outcome: { erased: boolean; corrupt: boolean }, replay: boolean): void {
    if (outcome.corrupt) this.#core.events.emit('corrupt', { key })
    if (replay) this.#core.events.emit('delete-replayed', { key, erased: outcome.erased })
  }

  #enqueue(key: string, entry: QueuedDelete, failure: RedisUnavailableError): DeleteOutcome {
    const queue = this.#queue
    if (!queue.has(key) && queue.size >= this.#settings.maxQueued) {
      this.#core.events.emit('delete-dropped', { key, reason: 'outbox-full' })
      throw new RedisUnavailableError(
        `delete not queued: the delete outbox is full (durableDeletes.maxQueued ${this.#settings.maxQueued})`,
        failure,
      )
    }
    queue.delete(key) // coalesced: one entry per key, the latest, at the end of the line
    queue.set(key, entry)
    this.#listen(true)
    this.#core.events.emit('delete-queued', { key, queued: queue.size })
    this.#armRetry()
    return 'queued'
  }

  /** Replays on the client's reconnect while deletes wait (the client outlives the cache: the listener goes with them). */
  #listen(on: boolean): void {
    if (this.#listening === on || !this.#client) return
    this.#listening = on
    const client = this.#client as NodeJS.EventEmitter
    if (on) client.on('ready', this.#onReady)
    else client.off('ready', this.#onReady)
  }

  #armRetry(): void {
    if (this.#timer || this.#closed) return
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      this.#replaySoon()
    }, this.#settings.retryMs)
    this.#timer.unref()
  }

  #replaySoon(): void {
    if (this.#closed || this.#replaying || this.#queue.size === 0) return
    const replay = (this.#replaying = this.#replay().finally(() => {
      this.#replaying = undefined
      if (this.#queue.size > 0) this.#armRetry()
      else this.#listen(false)
    }))
    this.#core.track(replay)
  }

  /** Sends the queued deletes in order, REPLAY_BATCH at a time, until one fails (the rest wait for the next try). */
  async #replay(): Promise<void> {
    const replays = this.#replays
    if (!replays) return
    while (this.#queue.size > 0) {
      const batch = [...this.#queue].slice(0, REPLAY_BATCH)
      const results = await Promise.allSettled(
        batch.map(([, entry]) =>
          replays.invalidateBefore(entry.keys, entry.beforeMicros, this.#core.retentionMs, entry.broadcast),
        ),
      )
      let failed = false
      results.forEach((result, i) => {
        const [key, entry] = batch[i]!
        if (result.status === 'rejected') return void (failed = true)
        if (this.#queue.get(key) === entry) this.#queue.delete(key) // unless deleted again meanwhile
        this.#replayed(key, result.value, true)
      })
      if (failed) return
    }
  }
}
