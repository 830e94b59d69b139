import { RedisUnavailableError } from '../errors.js'

interface Queued {
  resolve(): void
  reject(error: Error): void
}

/** A FIFO with O(1) shift (an array with a moving head, compacted as it drains). */
class Fifo<T> {
  private items: T[] = []
  private head = 0
  get length(): number {
    return this.items.length - this.head
  }
  push(item: T): void {
    this.items.push(item)
  }
  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined
    const item = this.items[this.head]
    this.items[this.head++] = undefined as T
    if (this.head > 1_024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }
  drain(): T[] {
    const rest = this.items.slice(this.head)
    this.items = []
    this.head = 0
    return rest
  }
}

/**
 * The budget of Redis commands one cache has in flight. Beyond `maxInFlight` a command
 * waits here, not inside ioredis, so its `redisTimeout` starts only when it is sent: a
 * burst of 100,000 hits no longer times itself out on its own queue and opens the breaker.
 * Commands that hold a lock (renew, commit, release) go ahead of lookups, so a burst of
 * reads cannot make a leader lose its lease; and renewals ahead of them all, so a burst of
 * commits cannot either (one renewal call carries up to 500 locks: 20,000 commits queued
 * at once outlasted the lease of the locks still waiting to commit).
 *
 * A queued command waits while Redis answers the ones ahead of it; when they fail the
 * breaker opens and `failQueued()` rejects the queue at once. Past `maxQueued` a command is
 * refused at once (the call carries on without Redis, as on any Redis failure).
 */
export class CommandBudget {
  private inFlight = 0
  private readonly renewals = new Fifo<Queued>()
  private readonly urgent = new Fifo<Queued>()
  private readonly normal = new Fifo<Queued>()

  constructor(
    readonly maxInFlight: number,
    readonly maxQueued: number,
  ) {}

  /** Commands sent and not yet answered, and commands waiting for a slot. */
  get load(): { inFlight: number; queued: number } {
    return { inFlight: this.inFlight, queued: this.queued }
  }

  private get queued(): number {
    return this.renewals.length + this.urgent.length + this.normal.length
  }

  /**
   * Takes a slot: `undefined` when one was free (no await needed), else a promise for one.
   * `urgent`: a lock holder's command; `renewal`: a lease renewal, first of all.
   */
  acquire(urgent: boolean, renewal = false): Promise<void> | undefined {
    if (this.inFlight < this.maxInFlight && this.queued === 0) {
      this.inFlight++
      return undefined
    }
    if (this.queued >= this.maxQueued) {
      return Promise.reject(
        new RedisUnavailableError(
          `redis command refused: ${this.maxQueued} commands already queued (redisCommands.maxQueued)`,
        ),
      )
    }
    return new Promise<void>((resolve, reject) =>
      (renewal ? this.renewals : urgent ? this.urgent : this.normal).push({ resolve, reject }),
    )
  }

  /** Gives a slot back, to the next queued command if there is one. */
  release(): void {
    const next = this.renewals.shift() ?? this.urgent.shift() ?? this.normal.shift()
    if (next)
      next.resolve() // the slot passes on: inFlight unchanged
    else this.inFlight--
  }

  /** Rejects every queued command (the breaker opened, or the connection dropped). */
  failQueued(error: Error): void {
    for (const queued of [...this.renewals.drain(), ...this.urgent.drain(), ...this.normal.drain()])
      queued.reject(error)
  }
}
