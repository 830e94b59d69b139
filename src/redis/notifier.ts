import type { Cluster, Redis } from 'ioredis'
import { RedisUnavailableError } from '../errors.js'
import { delay, withTimeout } from '../timers.js'
import type { ServerProbe } from './server-probe.js'
import { keyPrefixOf } from './store.js'

/** One key's wait for news: messages queue up until read, so none falls between two reads. */
export interface Subscription {
  /** The next message, or `undefined` after `timeoutMs` without one. */
  next(timeoutMs: number): Promise<string | undefined>
  release(): void
}

class ChannelSubscription implements Subscription {
  private readonly queue: string[] = []
  private wake: (() => void) | undefined

  constructor(private readonly onRelease: (subscription: ChannelSubscription) => void) {}

  push(message: string): void {
    this.queue.push(message)
    this.wake?.()
  }

  async next(timeoutMs: number): Promise<string | undefined> {
    if (this.queue.length === 0) {
      const wait = delay(timeoutMs)
      this.wake = () => wait.cancel()
      await wait.promise
      this.wake = undefined
    }
    return this.queue.shift()
  }

  release(): void {
    this.wake?.()
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

  /**
   * Sharded (the probe says so: a Redis ≥ 7 Cluster, or `shardedPubSub: true`): per-key
   * channels use SSUBSCRIBE, so a commit is relayed only within its shard. The invalidation
   * broadcast stays a plain SUBSCRIBE. The connection is opened once the mode is known.
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
    const subscriber = sharded ? (this.client as Cluster).duplicate([], { shardedSubscribers: true }) : (this.client as Redis).duplicate()
    const events = subscriber as unknown as NodeJS.EventEmitter
    events.on('error', () => {
      // Reconnects are ioredis' job and waits are bounded; commands report outages.
    })
    events.on('message', (channel: string, message: string) => this.dispatch(channel, message))
    events.on('smessage', (channel: string, message: string) => this.dispatch(channel, message))
    events.on('ready', () => (this.subscribedOnce = true))
    this.subscriber = subscriber
    return subscriber
  }

  private dispatch(channel: string, message: string): void {
    this.listeners.get(channel)?.(message)
    const state = this.channels.get(channel)
    if (state) for (const subscription of state.subscriptions) subscription.push(message)
  }

  /** Subscribes (or joins the existing subscription) and resolves once Redis confirmed it. */
  async subscribe(channel: string): Promise<Subscription> {
    // As for commands: a subscriber that was connected and is not now would only queue this.
    if (this.subscriber && this.subscribedOnce && this.subscriber.status !== 'ready') {
      throw new RedisUnavailableError(`subscribe skipped: connection is ${this.subscriber.status}`)
    }
    let sharded: boolean
    try {
      sharded = await this.probe.shardedPubSub()
    } catch (error) {
      throw error instanceof RedisUnavailableError ? error : new RedisUnavailableError(`subscribe failed: ${(error as Error)?.message}`, error)
    }
    const name = this.prefix + channel
    let state = this.channels.get(name)
    if (!state) {
      const connection = this.connection(sharded)
      const ready = this.sharded ? (connection as Cluster).ssubscribe(name) : connection.subscribe(name)
      state = { subscriptions: new Set(), ready }
      this.channels.set(name, state)
    }
    const subscription = new ChannelSubscription((s) => this.unsubscribe(name, s))
    state.subscriptions.add(subscription)
    try {
      await withTimeout(state.ready, this.timeoutMs, () => new RedisUnavailableError(`subscribe timed out after ${this.timeoutMs} ms`))
    } catch (error) {
      subscription.release()
      throw error instanceof RedisUnavailableError ? error : new RedisUnavailableError(`subscribe failed: ${(error as Error)?.message}`, error)
    }
    return subscription
  }

  /** A permanent subscription with a callback (the L1 invalidation bus). */
  listen(channel: string, onMessage: (message: string) => void): void {
    const name = this.prefix + channel
    this.listeners.set(name, onMessage)
    this.probe.settled.then((sharded) => {
      if (this.closed) return
      this.connection(sharded).subscribe(name).catch(() => {
        // Retried by ioredis' auto-resubscribe once the connection is back.
      })
    }, () => {})
  }

  private unsubscribe(name: string, subscription: ChannelSubscription): void {
    const state = this.channels.get(name)
    if (!state || !state.subscriptions.delete(subscription) || state.subscriptions.size > 0) return
    this.channels.delete(name)
    const unsubscribed = this.sharded ? (this.subscriber as Cluster | undefined)?.sunsubscribe(name) : this.subscriber?.unsubscribe(name)
    unsubscribed?.catch(() => {})
  }

  close(): void {
    this.closed = true
    for (const state of this.channels.values()) for (const subscription of state.subscriptions) subscription.release()
    this.channels.clear()
    this.listeners.clear()
    this.subscriber?.disconnect()
    this.subscriber = undefined
  }
}
