import type { Cluster } from 'ioredis'
import type { CacheEmitter } from '../../events.js'
import { RedisUnavailableError } from '../../errors.js'
import type { CircuitBreaker } from './breaker.js'
import { delay } from '../../timers.js'
import { canFailOver, FailingClock } from '../../redis/failing-clock.js'
import { CommandBudget } from '../../redis/command-budget.js'
import { FreshReadBatch } from './fresh-reads.js'
import { batchesOf } from '../../redis/batches.js'
import { Dispatch, InFlightList } from './in-flight.js'
import { keyPrefixOf } from '../../redis/keys.js'
import type { ScriptedClient } from './scripts.js'

/** Commands of a process that holds a lock: they skip ahead of queued lookups. */
const LOCK_HOLDER_OPERATIONS = new Set(['extend', 'commit', 'release'])

/**
 * How a command reaches Redis and is accounted: bounded by the command budget (lock holders'
 * commands first), by its own timeout on one timer (in-flight.ts), failed at once while a
 * connection that was up is down, counted by the circuit breaker and the failing clock, and
 * retried through a failover (throughFailover). RedisStore speaks the protocol through it.
 */
export class CommandChannel {
  /** A Cluster or Sentinel client: a failing command may be a failover in progress, worth retrying. */
  private readonly failsOver: boolean
  /**
   * Set by throughFailover while it starts a retry. The breaker counts consecutive failed
   * operations, and the retries of one operation waiting out one failover are not more of
   * them (or a single shard's failover would open the breaker for every key of the cluster).
   */
  private retrying = false
  /** How long Redis (on a Cluster: the key's master) has been failing. */
  private readonly failing: FailingClock
  private connectedOnce: boolean
  /** Commands sent and not answered, on one timer for their timeouts: the plain ones, and those that also WAIT. */
  private readonly inFlight: InFlightList<Dispatch<unknown>>
  private inFlightWaiting: InFlightList<Dispatch<unknown>> | undefined
  private readonly budget: CommandBudget
  /** Fresh-copy reads of this turn of the event loop, sent as one MGET (see getFresh, fresh-reads.ts). */
  readonly reads: FreshReadBatch
  private readonly connection: NodeJS.EventEmitter
  private readonly onReady = () => (this.connectedOnce = true)
  /** Commands already sent when the connection drops would be retried after a reconnect: fail them now, and the queued ones. */
  private readonly onClose = () => {
    const lost = new RedisUnavailableError('redis connection lost')
    const fail = (command: Dispatch<unknown>) => command.failed(this.failure(command, lost))
    this.inFlight.failAll(fail)
    this.inFlightWaiting?.failAll(fail)
    this.budget.failQueued(lost)
  }

  /** @internal */
  constructor(
    /** @internal */
    readonly client: ScriptedClient,
    private readonly timeoutMs: number,
    private readonly breaker: CircuitBreaker,
    private readonly events: CacheEmitter,
    /** See `redisFailoverWait`; only used on a client that can fail over. */
    private readonly failoverWaitMs = 0,
    commands: { maxInFlight: number; maxQueued: number } = { maxInFlight: 256, maxQueued: 50_000 },
  ) {
    this.budget = new CommandBudget(commands.maxInFlight, commands.maxQueued)
    this.inFlight = this.inFlightList(timeoutMs)
    this.reads = new FreshReadBatch(this.client, this.budget, breaker, events, (dispatch) => this.dispatch(dispatch))
    this.failsOver = canFailOver(client)
    this.failing = new FailingClock(client.isCluster === true ? (client as Cluster) : undefined, keyPrefixOf(client))
    this.connectedOnce = client.status === 'ready'
    this.connection = client as unknown as NodeJS.EventEmitter
    if (!this.connectedOnce) this.connection.once('ready', this.onReady)
    this.connection.on('close', this.onClose)
  }

  /** Removes our listeners from the client, which outlives the cache. */
  close(): void {
    this.connection.off('ready', this.onReady)
    this.connection.off('close', this.onClose)
  }

  /** Is throughFailover starting a retry (see `retrying`)? Such a command goes alone, by call(). */
  get startingRetry(): boolean {
    return this.retrying
  }

  /** The client was connected and is not now: it would queue a command until it reconnects. */
  connectionLost(): boolean {
    return this.connectedOnce && this.client.status !== 'ready'
  }

  /**
   * `operation`, retried every `retryMs` on a client that can fail over (Cluster, Sentinel)
   * until `deadline` (performance.now() ms), for as long as Redis has been failing for less
   * than `failoverWaitMs`. During a failover every process would otherwise run the loader
   * in-process, each one an extra load, or a leader's commit would be lost and its waiters
   * would wait out its lock; retrying until the promoted node serves keeps it to one load.
   * A Redis down for longer is an outage: callers then carry on without it at once.
   * - `key`: any key of the entry. On a Cluster, how long Redis has been failing is judged
   *   for the master of its slot (see FailingClock).
   * - `patient`: the caller waits for another process's load, as it would until `deadline`
   *   anyway, so the failover does not end that wait sooner (else each waiter loads on its own).
   */
  async throughFailover<T>(
    operation: () => Promise<T>,
    deadline: number,
    retryMs: number,
    { key, patient = false }: { key?: string; patient?: boolean } = {},
  ): Promise<T> {
    let firstFailure: number | undefined // of this operation: bounds one that fails outside call() (a subscription)
    for (let attempt = 0; ; attempt++) {
      try {
        let result: Promise<T>
        this.retrying = attempt > 0
        try {
          result = operation() // call() reads `retrying` synchronously, before its first await
        } finally {
          this.retrying = false
        }
        return await result
      } catch (error) {
        const now = performance.now()
        firstFailure ??= now
        const failingFor = now - Math.min(this.failing.failingSince(key) ?? now, firstFailure)
        if (!this.failsOver || (!patient && failingFor >= this.failoverWaitMs) || now + retryMs >= deadline) throw error
        await delay(retryMs).promise
      }
    }
  }

  /** A command of another module (the tag scripts), bounded and guarded as the store's own are. */
  run<T>(operation: string, command: () => Promise<T>): Promise<T> {
    return this.call(operation, undefined, command)
  }

  /**
   * `send` for each item, at most `redisCommands.maxInFlight` at a time: a fan-out (a tag's
   * members, an entry's tags) wider than the budget would overflow `maxQueued` on its own
   * and fail every time. With the default budget (256) it is one round.
   */
  async fanOut<T, R>(items: readonly T[], send: (item: T) => Promise<R>): Promise<R[]> {
    const width = this.budget.maxInFlight
    if (items.length <= width) return Promise.all(items.map(send))
    const results: R[] = []
    for (const batch of batchesOf(items, width)) results.push(...(await Promise.all(batch.map(send))))
    return results
  }

  /**
   * Commands, bounded by the budget of commands in flight; lock holders' commands queue first.
   * `key`: one the command touches, for the failing clock (undefined: the tag scripts).
   * `extraMs`: added to the timeout for a command that waits on the server on purpose (WAIT).
   */
  async call<T>(operation: string, key: string | undefined, command: () => Promise<T>, extraMs = 0): Promise<T> {
    // A retry through a failover goes to Redis even past an open breaker: it has already been
    // judged worth it (within redisFailoverWait), and an open breaker would only skip it to no end.
    // Read before the first await (throughFailover sets it only while it calls us).
    const retry = this.retrying
    // Commands reach Redis in the order they were asked for: reads not sent yet go first.
    if (this.reads.pending && operation !== 'get' && operation !== 'mget') this.reads.sendReads()
    if (!retry && !this.breaker.allow())
      throw new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`)
    const waiting = this.budget.acquire(LOCK_HOLDER_OPERATIONS.has(operation), operation === 'extend')
    if (waiting) {
      try {
        await waiting
      } catch (error) {
        // Refused (queue full) or flushed (breaker opened, connection lost): no failure of its own.
        this.events.emit('redis-error', { operation, error })
        throw error
      }
    }
    try {
      return await this.send(operation, command, extraMs, retry, key)
    } finally {
      this.budget.release()
    }
  }

  /**
   * One command with its own timeout, started now that it is sent; `retry`: a retry through a
   * failover, not counted by the breaker; `key`: one it touches (batched reads: none, standalone).
   */
  private send<T>(operation: string, command: () => Promise<T>, extraMs = 0, retry = false, key?: string): Promise<T> {
    return new Promise<T>((resolve, reject) =>
      this.dispatch(new Settles(operation, retry, command, resolve, reject, key), extraMs),
    )
  }

  /**
   * Sends `command` now, and settles `dispatch` once: with the reply, or after `redisTimeout`
   * (plus `extraMs`), or when the connection drops, whichever is first. No promise of its
   * own and no timer per command (see in-flight.ts): this is on every fresh hit's path.
   */
  private dispatch<T>(dispatch: Dispatch<T>, extraMs = 0): void {
    // A client that was connected and lost its connection would queue the command until it
    // reconnects: fail at once instead of after redisTimeout. Before the first connection,
    // commands may wait for it (a starting process should not skip Redis).
    if (this.connectionLost()) {
      dispatch.settled = true
      dispatch.failed(
        this.failure(
          dispatch,
          new RedisUnavailableError(`redis ${dispatch.operation} skipped: connection is ${this.client.status}`),
        ),
      )
      return
    }
    const list = (
      extraMs === 0 ? this.inFlight : (this.inFlightWaiting ??= this.inFlightList(this.timeoutMs + extraMs))
    ) as InFlightList<Dispatch<T>>
    list.add(dispatch)
    dispatch.send().then(
      (value) => {
        if (!list.settle(dispatch)) return
        this.breaker.success()
        this.failing.succeeded(dispatch.key)
        dispatch.answered(value)
      },
      (error: unknown) => {
        if (!list.settle(dispatch)) return
        const answer = dispatch.recovers(error)
        if (answer === undefined) return dispatch.failed(this.failure(dispatch, error))
        this.breaker.success()
        this.failing.succeeded(dispatch.key)
        dispatch.answered(answer)
      },
    )
  }

  private inFlightList(timeoutMs: number): InFlightList<Dispatch<unknown>> {
    return new InFlightList(timeoutMs, (command) => {
      command.failed(
        this.failure(command, new RedisUnavailableError(`redis ${command.operation} timed out after ${timeoutMs} ms`)),
      )
    })
  }

  /** A command failed: the breaker's and the outage clock's accounting; the error to report, typed. */
  private failure(command: Dispatch<unknown>, error: unknown): RedisUnavailableError {
    const { operation } = command
    if (!command.retry) this.breaker.failure()
    this.failing.failed(command.key, performance.now())
    if (this.breaker.isOpen())
      this.budget.failQueued(new RedisUnavailableError(`redis skipped: circuit breaker open (${operation})`))
    this.events.emit('redis-error', { operation, error })
    return error instanceof RedisUnavailableError
      ? error
      : new RedisUnavailableError(`redis ${operation} failed: ${(error as Error)?.message}`, error)
  }
}

/** A command whose caller awaits a promise (send). */
class Settles<T> extends Dispatch<T> {
  constructor(
    operation: string,
    retry: boolean,
    readonly send: () => Promise<T>,
    readonly answered: (value: T) => void,
    readonly failed: (error: Error) => void,
    key?: string,
  ) {
    super(operation, retry)
    this.key = key
  }
}
