import { decodeValue, fallbackValid, type Entry } from '../entry.js'
import { decodeFailure } from '../loader-error.js'
import { LockWaitTimeoutError, RemoteLoaderError } from '../errors.js'
import type { FreshRead } from './redis/fresh-reads.js'
import type { EntryKeys } from './redis/keys.js'
import type { Lookup, RedisStore } from './redis/store.js'
import { type Call, type FlightNotes, type Resolution, messageKind } from './call.js'
import { Refresher } from './refresh.js'

/**
 * What a lookup, a leader's message or a timed-out wait found, made into a caller's answer:
 * the hit, the copy to serve in grace, a remote failure, the wait's timeout. The request state
 * machine (request.ts) decides which; these say what each one returns.
 */
export abstract class Answers extends Refresher {
  /**
   * What to serve stale while a reload runs: Redis's copy in grace, or, when Redis has none
   * at all (flushed, evicted), this process's L1 copy if that is still in grace.
   */
  protected graceCopy(entry: Entry | undefined, found: Lookup, notes: FlightNotes): Entry | undefined {
    if (entry) return found.state === 'grace' ? entry : undefined
    const held = notes.fallback
    return found.state === 'miss' && held && performance.now() < held.graceUntil ? held : undefined
  }

  /** A read of the fresh copy answered: the hit, or undefined when it found nothing usable. */
  protected freshHit(call: Call, read: FreshRead, store: RedisStore): Resolution | undefined {
    if (this.memory || call.policy.earlyRefresh.kind !== 'off') {
      const entry = this.freshEntry(call.key, read, store)
      return entry && this.hit(call, entry)
    }
    // Nothing would keep the entry (no L1, no early refresh): decode the value alone.
    const record = this.freshRecord(call.key, read, store.clock.now()!)
    if (!record) return undefined
    let value: unknown
    try {
      value = decodeValue(this.settings.codec, record.bytes, record.dataAt)
    } catch (error) {
      this.events.emit('corrupt', { key: call.key, error })
      return undefined
    }
    if (this.events.count('hit')) this.events.deliver('hit', { key: call.key, tier: 'redis' })
    return { value, outcome: 'hit', shareable: true }
  }

  protected hit(call: Call, entry: Entry): Resolution {
    if (this.memory) this.remember(call, entry)
    if (this.events.count('hit')) this.events.deliver('hit', { key: call.key, tier: 'redis' })
    if (call.policy.earlyRefresh.kind !== 'off' && this.dueForEarlyRefresh(call, entry, performance.now())) {
      // After this flight has ended, or refreshInBackground would see it and stand down.
      setImmediate(() => {
        if (this.deletions === call.epoch) this.refreshInBackground(call, 'refresh', entry) // not after a delete
      })
    }
    return { value: entry.value, outcome: 'hit', shareable: true }
  }

  /** A message on the key's channel, from the leader in another process; undefined = re-check. */
  protected async onLeaderMessage(
    call: Call,
    keys: EntryKeys,
    message: Buffer,
    fallback: Entry | undefined,
  ): Promise<Resolution | undefined> {
    switch (messageKind(message)) {
      case 'c':
      case 'n': {
        const entry = await this.committedEntry(call.key, keys, message)
        if (!entry) return undefined
        this.remember(call, entry)
        this.events.emit('coalesced', { key: call.key, from: 'remote' })
        return { value: entry.value, outcome: 'coalesced', shareable: true }
      }
      case 'e':
        return this.remoteFailure(call, message.toString(), fallback)
      case 'u':
        return this.loadUncached(call)
      default:
        return undefined
    }
  }

  /** `e|…` (see loader-error.ts): a load failed elsewhere. Stale if covered, else the error. */
  protected remoteFailure(call: Call, message: string, fallback: Entry | undefined): Resolution {
    const { name, message: remoteMessage } = decodeFailure(message)
    const error = new RemoteLoaderError(call.key, name, remoteMessage)
    if (!fallbackValid(fallback, performance.now())) throw error
    this.events.emit('fail-safe', { key: call.key, error })
    return this.stale(call.key, fallback, 'fail-safe')
  }

  /**
   * After waitTimeout, or at once past `maxWaits` (`capped`): stale if we can, a
   * LockWaitTimeoutError if asked, else undefined (load it ourselves).
   */
  protected waitTimedOut(call: Call, fallback: Entry | undefined, capped = false): Resolution | undefined {
    if (!capped) this.events.emit('timeout', { key: call.key, kind: 'wait' })
    if (fallbackValid(fallback, performance.now())) return this.stale(call.key, fallback, 'wait-timeout')
    if (call.policy.onWaitTimeout === 'throw') {
      throw capped
        ? new LockWaitTimeoutError(call.key, 0, this.settings.maxWaits)
        : new LockWaitTimeoutError(call.key, call.policy.waitTimeout)
    }
    return undefined
  }
}
