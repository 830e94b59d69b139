import { AsyncResource } from 'node:async_hooks'
import type { CacheEmitter } from '../../events.js'
import { RedisUnavailableError } from '../../errors.js'
import type { CircuitBreaker } from './breaker.js'
import type { CommandBudget } from '../../redis/command-budget.js'
import { batchesOf } from '../../redis/batches.js'
import { Dispatch, type Dispatcher } from './in-flight.js'
import type { ScriptedClient } from './scripts.js'

export const FOREIGN_TYPE = Symbol('foreign type')
/** What a read of the fresh copy found: its bytes (see record.ts), nothing (not fresh), or a key of a foreign type. */
export type FreshRead = Buffer | null | typeof FOREIGN_TYPE

/** Most fresh-copy reads sent in one MGET. */
const MAX_READS_PER_MGET = 16

/**
 * A read of a fresh copy, told once what its reply found, or why there was none. A fresh
 * hit is one of these, not a promise: the reply is decoded and answered from inside the
 * batch's reaction, one promise hop fewer on every hit.
 */
export interface FreshReader {
  readonly freshKey: string
  found(read: FreshRead): void
  failed(error: unknown): void
}

/** Is this a GET's answer for a key of a foreign type (reported as FOREIGN_TYPE, not an outage)? */
const isWrongType = (error: unknown): boolean => String((error as Error)?.message).startsWith('WRONGTYPE')

/** @internal One GET of a fresh copy; a key of a foreign type is reported, not an outage. */
export function getOne(client: ScriptedClient, key: string): Promise<FreshRead> {
  return client.getBuffer(key).catch((error: unknown) => {
    if (isWrongType(error)) return FOREIGN_TYPE
    throw error
  })
}

/** A promise of a read, for the callers that await one. */
export function promisedRead(freshKey: string, send: (reader: FreshReader) => void): Promise<FreshRead> {
  return new Promise((resolve, reject) => send({ freshKey, found: resolve, failed: reject }))
}

/**
 * The fresh-copy reads asked for in one turn of the event loop, sent together as one MGET
 * (see RedisStore.getFresh). Each read holds its own slot of the command budget.
 *
 * A read asked for while no other is pending or in flight goes out at once, as a GET: one
 * caller at a time has nothing to batch with, and the deferral was most of what its
 * batching cost. Under concurrency reads are in flight, so the next ones wait for the end
 * of the turn (setImmediate): an HTTP server answers each request from its own socket
 * event, and a nextTick would flush after each of them, one GET per request. Measured with
 * 25 callers arriving one per macrotask (`npm run bench:hit`): 10.9 µs of client CPU per
 * hit with a nextTick, 5.7 µs so, against 6.3 µs for a bare GET + JSON.parse.
 */
export class FreshReadBatch {
  /** Fresh-copy reads asked for in this turn of the event loop, sent together as one MGET (see getFresh). */
  private pendingReads: FreshReader[] | undefined
  /** Reads sent and not yet answered. */
  private unanswered = 0

  /** @internal */
  constructor(
    /** @internal */
    readonly client: ScriptedClient,
    private readonly budget: CommandBudget,
    private readonly breaker: CircuitBreaker,
    private readonly events: CacheEmitter,
    private readonly dispatch: Dispatcher,
  ) {}

  /** Reads asked for and not sent yet: another command must flush them first, to keep the order. */
  get pending(): boolean {
    return this.pendingReads !== undefined
  }

  /** A read of `reader.freshKey`, once it has its budget slot, sent with the others of this turn. */
  read(reader: FreshReader): void {
    if (!this.breaker.allow()) {
      const open = new RedisUnavailableError('redis skipped: circuit breaker open (get)')
      return void Promise.resolve().then(() => reader.failed(open)) // never from inside the caller's call
    }
    const waiting = this.budget.acquire(false)
    if (!waiting) return this.queueRead(reader)
    waiting.then(
      () => this.queueRead(reader),
      (error: Error) => {
        this.events.emit('redis-error', { operation: 'get', error })
        reader.failed(error)
      },
    )
  }

  /** A read that holds its budget slot, sent with the others of this turn. */
  private queueRead(read: FreshReader): void {
    if (this.unanswered === 0 && !this.pendingReads) return this.send([read])
    if (!this.pendingReads) {
      this.pendingReads = []
      // After every caller of this turn of the event loop has asked: setImmediate, not nextTick,
      // so that requests arriving one per socket event (HTTP) share the MGET too.
      setImmediate(this.sendReads)
    }
    // The MGET's reply runs in the context of the caller that scheduled it: each read is answered
    // in its own caller's, or a miss would go on, up to its loader and its wait, in a neighbour's
    // AsyncLocalStorage. (No cheaper test of "same context": AsyncLocalStorage.run keeps the async id.)
    this.pendingReads.push(new ScopedReader(read))
  }

  /**
   * Sends the reads of this turn: one GET, or one MGET for several (one write, one reply:
   * under concurrency most of a hit's cost is the socket write). MGET answers nil for a
   * key of another type, which then goes the script's way and is repaired there. Each read
   * gives its slot back when the reply (or the failure) is in.
   */
  readonly sendReads = (): void => {
    const reads = this.pendingReads
    this.pendingReads = undefined
    if (!reads) return
    if (reads.length === 1) return this.send(reads)
    // Several MGETs rather than one big one: Redis answers the first while we decode it.
    for (const batch of batchesOf(reads, MAX_READS_PER_MGET)) this.send(batch)
  }

  private send(reads: FreshReader[]): void {
    this.unanswered += reads.length
    this.dispatch(new SentReads(reads, this))
  }

  /** `count` reads are answered (or failed): their budget slots are free. */
  done(count: number): void {
    this.unanswered -= count
    for (let i = 0; i < count; i++) this.budget.release()
  }
}

/** A read answered in the async context of the caller that asked for it (see queueRead). */
class ScopedReader extends AsyncResource implements FreshReader {
  readonly freshKey: string
  constructor(private readonly read: FreshReader) {
    super('stampede-guard.fresh-read')
    this.freshKey = read.freshKey
  }
  found(found: FreshRead): void {
    this.runInAsyncScope(this.read.found, this.read, found)
  }
  failed(error: unknown): void {
    this.runInAsyncScope(this.read.failed, this.read, error)
  }
}

/** One GET or MGET of fresh copies in flight: its reply (or failure) settles each read and frees its budget slot. */
class SentReads extends Dispatch<FreshRead | (Buffer | null)[]> {
  constructor(
    private readonly reads: FreshReader[],
    private readonly batch: FreshReadBatch,
  ) {
    super(reads.length === 1 ? 'get' : 'mget', false)
  }

  send(): Promise<FreshRead | (Buffer | null)[]> {
    const { reads, batch } = this
    return reads.length === 1
      ? batch.client.getBuffer(reads[0]!.freshKey)
      : batch.client.mgetBuffer(reads.map((read) => read.freshKey))
  }

  answered(value: FreshRead | (Buffer | null)[]): void {
    const reads = this.reads
    this.batch.done(reads.length)
    if (Array.isArray(value)) for (let i = 0; i < reads.length; i++) reads[i]!.found(value[i] ?? null)
    else reads[0]!.found(value)
  }

  /** A GET of a key of a foreign type answers WRONGTYPE: that is a reply (a corrupt copy), not an outage. */
  override recovers(error: unknown): FreshRead | undefined {
    return this.operation === 'get' && isWrongType(error) ? FOREIGN_TYPE : undefined
  }

  failed(error: Error): void {
    this.batch.done(this.reads.length)
    for (const read of this.reads) read.failed(error)
  }
}
