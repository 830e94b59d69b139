import type { CacheEmitter } from '../events.js'
import { RedisUnavailableError } from '../errors.js'
import type { CircuitBreaker } from './breaker.js'
import type { CommandBudget } from './command-budget.js'
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

/** Sends one command with its own timeout, through the store's breaker accounting (RedisStore.send). */
type Send = <T>(operation: string, command: () => Promise<T>) => Promise<T>

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
    private readonly send: Send,
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
      process.nextTick(() => this.sendReads())
    }
    this.pendingReads.push(read)
  }

  /**
   * Sends the reads of this tick: one GET, or one MGET for several (one write, one reply:
   * under concurrency most of a hit's cost is the socket write). MGET answers nil for a
   * key of another type, which then goes the script's way and is repaired there. Each read
   * gives its slot back when the reply (or the failure) is in.
   */
  sendReads(): void {
    const reads = this.pendingReads
    this.pendingReads = undefined
    if (!reads) return
    // Several MGETs rather than one big one: Redis answers the first while we decode it.
    for (let at = 0; at < reads.length; at += MAX_READS_PER_MGET) {
      const chunk = reads.slice(at, at + MAX_READS_PER_MGET)
      const sent: Promise<(FreshRead | null)[]> = chunk.length === 1
        ? this.send('get', () => getOne(this.client, chunk[0]!.key)).then((value) => [value])
        : this.send('mget', () => this.client.mgetBuffer(chunk.map((read) => read.key)))
      sent
        .then(
          (values) => chunk.forEach((read, i) => read.resolve(values[i] ?? null)),
          (error: unknown) => chunk.forEach((read) => read.reject(error)),
        )
        .finally(() => {
          for (let i = 0; i < chunk.length; i++) this.budget.release()
        })
    }
  }
}
