import { parseDuration, type Duration } from './duration.js'
import type { Lifetimes } from './entry.js'
import type { Policy } from './settings.js'
import { checkTags } from './tag.js'

/** What a loader receives. */
export interface LoaderContext<V = unknown> {
  /** The key being loaded. */
  readonly key: string
  /**
   * Fires when this process lost the lock (renewal failed, another process took over,
   * or `lock.maxHold` passed). The load may carry on; its result is then only stored
   * if no newer value got there first.
   */
  readonly signal: AbortSignal
  /** The stale value in hand, if any: what callers get if this load fails (fail-safe). */
  readonly staleValue: V | undefined
  /**
   * True for a refresh no caller waits for (grace or early refresh). It starts after the
   * caller that triggered it has been answered with the stale value.
   */
  readonly background: boolean
  /**
   * True when nothing this loader returns will be stored, whatever it asks: the cache runs
   * it for this caller alone (hit-for-miss, a follower of a result that was not shared,
   * a wait that timed out).
   */
  readonly uncached: boolean
  /** Sets the lifetimes of this result only, e.g. from an HTTP `Cache-Control` header. */
  cacheFor(lifetimes: { ttl?: Duration; staleTtl?: Duration; staleIfError?: Duration }): void
  /**
   * Do not store this result.
   * - `share` (default `true`): may callers waiting in this process receive it? With
   *   `false`, each of them, and every waiter in other processes, runs its own loader.
   * - `passFor` (default `0`): hit-for-miss. For this long, every caller in every process
   *   runs its own loader at once instead of queueing behind a lock for nothing.
   */
  doNotCache(options?: { share?: boolean; passFor?: Duration }): void
  /**
   * Adds tags to this result, as the call's `tags` option does (see docs/tags.md): for tags
   * known only once the data is read. Throws `InvalidArgumentError` on a bad tag.
   */
  tag(...tags: string[]): void
}

export type Loader<V> = (context: LoaderContext<V>) => V | Promise<V>

/** The loader's context, plus what the loader asked for, read back by the cache. */
export class LoadContext<V> implements LoaderContext<V> {
  readonly background: boolean
  readonly uncached: boolean
  ttl: number
  staleTtl: number
  staleIfError: number
  skip: { share: boolean; passMs: number } | undefined
  /** Tags the loader added with `tag()`. */
  readonly tags: string[] = []

  /** The signal, or what makes it on first read (a lease's: most loaders never read it). */
  private signalSource: AbortSignal | (() => AbortSignal)

  constructor(
    readonly key: string,
    signal: AbortSignal | (() => AbortSignal),
    readonly staleValue: V | undefined,
    policy: Policy,
    kind: { background?: boolean; uncached?: boolean } = {},
  ) {
    this.signalSource = signal
    this.background = kind.background ?? false
    this.uncached = kind.uncached ?? false
    this.ttl = policy.ttl
    this.staleTtl = policy.staleTtl
    this.staleIfError = policy.staleIfError
  }

  get signal(): AbortSignal {
    if (typeof this.signalSource === 'function') this.signalSource = this.signalSource()
    return this.signalSource
  }

  cacheFor(lifetimes: { ttl?: Duration; staleTtl?: Duration; staleIfError?: Duration }): void {
    if (lifetimes.ttl !== undefined) this.ttl = parseDuration('ttl', lifetimes.ttl)
    if (lifetimes.staleTtl !== undefined) this.staleTtl = parseDuration('staleTtl', lifetimes.staleTtl, true)
    if (lifetimes.staleIfError !== undefined)
      this.staleIfError = parseDuration('staleIfError', lifetimes.staleIfError, true)
  }

  doNotCache(options: { share?: boolean; passFor?: Duration } = {}): void {
    this.skip = {
      share: options.share ?? true,
      passMs: options.passFor === undefined ? 0 : parseDuration('passFor', options.passFor, true),
    }
  }

  tag(...tags: string[]): void {
    this.tags.push(...checkTags(tags, 'ctx.tag', this.tags))
  }

  /** Remaining lifetimes of a value stored now. */
  lifetimes(loadMs: number): Lifetimes {
    return {
      ttlMs: this.ttl,
      freshMs: this.ttl,
      graceMs: this.ttl + this.staleTtl,
      fallbackMs: this.ttl + Math.max(this.staleTtl, this.staleIfError),
      loadMs,
    }
  }
}
