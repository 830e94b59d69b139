import type { Cluster, Redis } from 'ioredis'
import { RedisUnavailableError } from '../errors.js'
import { delay, withTimeout } from '../timers.js'
import type { ServerProbe } from './server-probe.js'
import { keyPrefixOf } from './keys.js'

/** One key's wait for news: messages queue up until read, so none falls between two reads. */
export interface Subscription {
  /**
   * The next message (bytes: a commit carries the value as stored), or `undefined` after
   * `timeoutMs` without one (`Infinity`: no timer; only a message, `interrupt()` or `release()` ends it).
   */
  next(timeoutMs: number): Promise<Buffer | undefined>
  /** Ends a pending `next()` with `undefined`, keeping the subscription (the poll scheduler's wake-up). */
  interrupt(): void
  /**
   * `next(Infinity)` without a promise: `listener.news()` gets the next message (at once if one
   * is queued), or `undefined` once released; once, unless `unlisten()` comes first.
   */
  listen(listener: NewsListener): void
  unlisten(): void
  release(): void
}

/** What a subscription hands its next message to when listened to (a parked wait). */
export interface NewsListener {
  news(message: Buffer | undefined): void
}

class ChannelSubscription implements Subscription {
  private readonly queue: Buffer[] = []
  private wake: (() => void) | undefined
  private listener: NewsListener | undefined
  private released = false

  constructor(private readonly onRelease: (subscription: ChannelSubscription) => void) {}

  push(message: Buffer): void {
    const listener = this.listener
    if (listener) {
      this.listener = undefined
      return listener.news(message)
    }
    this.queue.push(message)
    this.wake?.()
  }

  listen(listener: NewsListener): void {
    if (this.queue.length > 0 || this.released) return listener.news(this.queue.shift())
    this.listener = listener
  }

  unlisten(): void {
    this.listener = undefined
  }

  async next(timeoutMs: number): Promise<Buffer | undefined> {
    if (this.queue.length === 0 && !this.released) {
      if (timeoutMs === Infinity) {
        await new Promise<void>((resolve) => (this.wake = resolve))
      } else {
        const wait = delay(timeoutMs)
        this.wake = () => wait.cancel()
        await wait.promise
      }
      this.wake = undefined
    }
    return this.queue.shift()
  }

  interrupt(): void {
    this.wake?.()
  }

  release(): void {
    this.released = true
    this.wake?.()
    const listener = this.listener
    this.listener = undefined
    listener?.news(undefined)
    this.onRelease(this)
  }
}

interface ChannelState {
  subscriptions: Set<ChannelSubscription>
  ready: Promise<unknown>
}

/**
 * Pub/sub for waiters. One dedicated subscriber connection per cache, opened on
 * first use with `duplicate()`, and one Redis subscription per channel however many
 * waiters share it (reference-counted). Pub/sub is at-most-once, so callers always
 * bound their wait and re-check; this class only makes the common case instant.
 */
export class Notifier {
  private subscriber: Redis | Cluster | undefined
  private readonly channels = new Map<string, ChannelState>()
  private readonly listeners = new Map<string, (message: string) => void>()
  private readonly prefix: string
  private subscribedOnce = false
  private sharded = false
  private closed = false
  private down = false
  private readonly lossListeners = new Set<(phase: 'lost' | 'restored') => void>()

  /**
   * Sharded (the probe says so: a Redis ≥ 7 Cluster, or `shardedPubSub: true`): per-key
   * channels use SSUBSCRIBE, so a commit is relayed only within its shard. The invalidation
   * broadcast stays a plain SUBSCRIBE. The connection is opened once the mode is known.
   * @internal
   */
  constructor(
    private readonly client: Redis | Cluster,
    private readonly timeoutMs: number,
    private readonly probe: ServerProbe,
  ) {
    this.prefix = keyPrefixOf(client)
  }

  private connection(sharded: boolean): Redis | Cluster {
    if (this.subscriber) return this.subscriber
    this.sharded = sharded
    const subscriber = sharded
      ? (this.client as Cluster).duplicate([], { shardedSubscribers: true })
      : (this.client as Redis).duplicate()
    const events = subscriber as unknown as NodeJS.EventEmitter
    events.on('error', () => {
      // Reconnects are ioredis' job and waits are bounded; commands report outages.
    })
    events.on('messageBuffer', (channel: Buffer, message: Buffer) => this.dispatch(channel.toString(), message))
    events.on('smessageBuffer', (channel: Buffer, message: Buffer) => this.dispatch(channel.toString(), message))
    events.on('ready', () => {
      if (this.subscribedOnce) this.lost('restored') // what was published in the gap is gone
      this.subscribedOnce = true
    })
    events.on('close', () => {
      if (this.subscribedOnce && !this.closed && !this.down) this.lost('lost')
    })
    this.subscriber = subscriber
    return subscriber
  }

  /**
   * `listener` is told whenever messages may have been missed: the subscriber connection
   * closed, and again once it is back (ioredis reconnects and resubscribes in the background).
   */
  onLoss(listener: (phase: 'lost' | 'restored') => void): void {
    this.lossListeners.add(listener)
  }

  private lost(phase: 'lost' | 'restored'): void {
    this.down = phase === 'lost' // 'close' repeats for each failed reconnect attempt: told once
    for (const listener of this.lossListeners) listener(phase)
  }

  /** Connected now (or not yet opened): a subscription made now is confirmed promptly. */
  private get listening(): boolean {
    return !(this.subscriber && this.subscribedOnce && this.subscriber.status !== 'ready')
  }

  private dispatch(channel: string, message: Buffer): void {
    this.listeners.get(channel)?.(message.toString())
    const state = this.channels.get(channel)
    if (state) for (const subscription of state.subscriptions) subscription.push(message)
  }

  /**
   * Opens the subscriber connection now rather than on the first wait, once the probe knows
   * the pub/sub mode; resolves once it is ready or after `timeoutMs` (each wait), never rejects.
   */
  async warmUp(): Promise<void> {
    let sharded: boolean
    try {
      sharded = await this.probe.shardedPubSub()
    } catch {
      return // the server's version is unknown yet: the first wait opens the connection
    }
    if (this.closed) return
    const connection = this.connection(sharded)
    if (connection.status !== 'ready') await this.connectionReady(connection)
    // The L1 invalidation subscription confirmed: after ready(), no broadcast is missed.
    await withTimeout(Promise.resolve(this.listened), this.timeoutMs, () => new Error('unconfirmed')).catch(() => {})
  }

  private connectionReady(connection: Redis | Cluster): Promise<void> {
    return new Promise<void>((resolve) => {
      const events = connection as unknown as NodeJS.EventEmitter
      const done = () => {
        clearTimeout(timer)
        events.off('ready', done)
        resolve()
      }
      const timer = setTimeout(done, this.timeoutMs)
      timer.unref()
      events.once('ready', done)
    })
  }

  /**
   * Subscribes (or joins the existing subscription) and resolves once Redis confirmed it.
   * When only the subscriber connection is down (or the confirmation does not come within
   * `timeoutMs`), the subscription is returned unconfirmed: the waiter's bounded waits then
   * are its polls, and messages come again once ioredis has reconnected and resubscribed.
   * Losing pub/sub alone must not turn waiting into loading.
   */
  async subscribe(channel: string): Promise<Subscription> {
    let sharded: boolean
    try {
      sharded = await this.probe.shardedPubSub()
    } catch (error) {
      throw error instanceof RedisUnavailableError
        ? error
        : new RedisUnavailableError(`subscribe failed: ${(error as Error)?.message}`, error)
    }
    if (this.closed) throw new RedisUnavailableError('subscribe skipped: the cache is closed')
    const name = this.prefix + channel
    const listening = this.listening
    let state = this.channels.get(name)
    if (!state) {
      const connection = this.connection(sharded)
      const ready = this.sharded ? (connection as Cluster).ssubscribe(name) : connection.subscribe(name)
      const created: ChannelState = { subscriptions: new Set(), ready }
      // Refused (no offline queue): the next waiter subscribes again rather than joining a dead subscription.
      ready.catch(
        () => this.channels.get(name) === created && created.subscriptions.size === 0 && this.channels.delete(name),
      )
      state = created
      this.channels.set(name, state)
    }
    const subscription = new ChannelSubscription((s) => this.unsubscribe(name, s))
    state.subscriptions.add(subscription)
    // Disconnected: the subscribe is queued for the reconnect (and resubscribed by ioredis); poll meanwhile.
    if (listening)
      await withTimeout(state.ready, this.timeoutMs, () => new RedisUnavailableError('unconfirmed')).catch(() => {})
    return subscription
  }

  /** The invalidation bus's SUBSCRIBE, once asked for: `warmUp()` (so `cache.ready()`) waits for it. */
  private listened: Promise<unknown> | undefined

  /** A permanent subscription with a callback (the L1 invalidation bus). */
  listen(channel: string, onMessage: (message: string) => void): void {
    const name = this.prefix + channel
    this.listeners.set(name, onMessage)
    this.probe.settled.then(
      (sharded) => {
        if (this.closed) return
        this.listened = this.connection(sharded)
          .subscribe(name)
          .then(
            // What was cached before this subscription was confirmed may have missed a broadcast:
            // the same check as after a reconnect.
            () => this.lost('restored'),
            () => {
              // Retried by ioredis' auto-resubscribe once the connection is back.
            },
          )
      },
      () => {},
    )
  }

  private unsubscribe(name: string, subscription: ChannelSubscription): void {
    const state = this.channels.get(name)
    if (!state || !state.subscriptions.delete(subscription) || state.subscriptions.size > 0) return
    this.channels.delete(name)
    const unsubscribed = this.sharded
      ? (this.subscriber as Cluster | undefined)?.sunsubscribe(name)
      : this.subscriber?.unsubscribe(name)
    unsubscribed?.catch(() => {})
  }

  close(): void {
    this.closed = true
    for (const state of this.channels.values()) for (const subscription of state.subscriptions) subscription.release()
    this.channels.clear()
    this.listeners.clear()
    if (this.subscriber) closeSubscriber(this.subscriber, this.timeoutMs)
    this.subscriber = undefined
  }
}

/**
 * Ends the subscriber connection once what it has in flight is answered. After a reconnect
 * ioredis resubscribes on its own and leaves that command's rejection unhandled, so a
 * `disconnect()` while it is in flight surfaced as an unhandled rejection ("Connection is
 * closed.") in the user's process. QUIT is answered after it; if Redis does not answer within
 * `timeoutMs`, the connection is dropped.
 */
function closeSubscriber(subscriber: Redis | Cluster, timeoutMs: number): void {
  if (subscriber.isCluster || subscriber.status !== 'ready') return void subscriber.disconnect()
  const force = setTimeout(() => subscriber.disconnect(), timeoutMs)
  force.unref()
  subscriber.quit().then(
    () => clearTimeout(force),
    () => {
      clearTimeout(force)
      subscriber.disconnect()
    },
  )
}
