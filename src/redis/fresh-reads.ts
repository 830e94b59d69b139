import type { CacheEmitter } from '../events.js'
import { RedisUnavailableError } from '../errors.js'
import type { CircuitBreaker } from './breaker.js'
import type { CommandBudget } from './command-budget.js'
import { Dispatch, type Dispatcher } from './in-flight.js'
import type { ScriptedClient } from './scripts.js'

export const FOREIGN_TYPE = Symbol('foreign type')
/** What a read of the fresh copy found: its bytes (see record.ts), nothing (not fresh), or a key of a foreign type. */
export type FreshRead = Buffer | null | typeof FOREIGN_TYPE

/** Most fresh-copy reads sent in one MGET. */
const MAX_READS_PER_MGET = 16

interface PendingRead {
  key: string
  resolve: (read: FreshRead) => void
  reject: (error: unknown) => void
}

/** One GET of a fresh copy; a key of a foreign type is reported, not an outage. */
export function getOne(client: ScriptedClient, key: string): Promise<FreshRead> {
  return client.getBuffer(key).catch((error: unknown) => {
    if (String((error as Error)?.message).startsWith('WRONGTYPE')) return FOREIGN_TYPE
    throw error
  })
}

/**
 * The fresh-copy reads asked for in one tick, sent together as one MGET (see
 * RedisStore.getFresh). Each read holds its own slot of the command budget.
 */
export class FreshReadBatch {
  /** Fresh-copy reads asked for in this tick, sent together as one MGET (see getFresh). */
  private pendingReads: PendingRead[] | undefined

  constructor(
    private readonly client: ScriptedClient,
    private readonly budget: CommandBudget,
    private readonly breaker: CircuitBreaker,
    private readonly events: CacheEmitter,
    private readonly dispatch: Dispatcher,
  ) {}

  /** Reads asked for and not sent yet: another command must flush them first, to keep the order. */
  get pending(): boolean {
    return this.pendingReads !== undefined
  }

  /** A read of `key`, once it has its budget slot, sent with the others of this tick. */
  read(key: string): Promise<FreshRead> {
    return new Promise((resolve, reject) => {
      if (!this.breaker.allow()) return reject(new RedisUnavailableError('redis skipped: circuit breaker open (get)'))
      const read = { key, resolve, reject }
      const waiting = this.budget.acquire(false)
      if (!waiting) return this.queueRead(read)
      waiting.then(() => this.queueRead(read), (error: Error) => {
        this.events.emit('redis-error', { operation: 'get', error })
        reject(error)
      })
    })
  }

  /** A read that holds its budget slot, sent with the others of this tick. */
  private queueRead(read: PendingRead): void {
    if (!this.pendingReads) {
      this.pendingReads = []
      // After every caller of this tick has asked (nextTick runs once the promise jobs drain).
      process.nextTick(this.sendReads)
    }
    this.pendingReads.push(read)
  }

  /**
   * Sends the reads of this tick: one GET, or one MGET for several (one write, one reply:
   * under concurrency most of a hit's cost is the socket write). MGET answers nil for a
   * key of another type, which then goes the script's way and is repaired there. Each read
   * gives its slot back when the reply (or the failure) is in.
   */
  readonly sendReads = (): void => {
    const reads = this.pendingReads
    this.pendingReads = undefined
    if (!reads) return
    if (reads.length === 1) {
      const key = reads[0]!.key
      return this.dispatch(new SentReads(reads, 'get', this.budget), () => getOne(this.client, key))
    }
    // Several MGETs rather than one big one: Redis answers the first while we decode it.
    for (let at = 0; at < reads.length; at += MAX_READS_PER_MGET) {
      const chunk = reads.slice(at, at + MAX_READS_PER_MGET)
      this.dispatch(new SentReads(chunk, 'mget', this.budget), () => this.client.mgetBuffer(chunk.map((read) => read.key)))
    }
  }
}

/** One GET or MGET of fresh copies in flight: its reply (or failure) settles each read and frees its budget slot. */
class SentReads extends Dispatch<FreshRead | (Buffer | null)[]> {
  constructor(
    private readonly reads: PendingRead[],
    operation: 'get' | 'mget',
    private readonly budget: CommandBudget,
  ) {
    super(operation, false)
  }

  answered(value: FreshRead | (Buffer | null)[]): void {
    const reads = this.reads
    if (Array.isArray(value)) for (let i = 0; i < reads.length; i++) reads[i]!.resolve(value[i] ?? null)
    else reads[0]!.resolve(value)
    for (let i = 0; i < reads.length; i++) this.budget.release()
  }

  failed(error: Error): void {
    for (const read of this.reads) read.reject(error)
    for (let i = 0; i < this.reads.length; i++) this.budget.release()
  }
}
