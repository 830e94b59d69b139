import { fallbackValid, type Entry } from '../entry.js'
import { decodeValue } from '../stored-value.js'
import { decodeFailure } from '../loader-error.js'
import { LockWaitTimeoutError, RemoteLoaderError } from '../errors.js'
import type { FreshRead } from './redis/fresh-reads.js'
import type { EntryKeys } from './redis/keys.js'
import type { Lookup, RedisStore } from './redis/store.js'
import { type Call, type FlightNotes, type Resolution, messageKind } from './call.js'
import type { CacheCore } from './core.js'
import type { LoadLeader } from './lead.js'
import type { Refresher } from './refresh.js'

/**
 * What L1, a lookup, a leader's message or a timed-out wait found, made into a caller's
 * answer: the hit, the copy to serve in grace, a remote failure, the wait's timeout. The
 * flight (resolve.ts) decides which; these say what each one returns.
 */
export class Answers {
  constructor(
    private readonly core: CacheCore,
    private readonly leader: LoadLeader,
    private readonly refresher: Refresher,
  ) {}

  /** L1's answer (synchronous): fresh, or stale while in backoff or while a reload runs; undefined to ask further. */
  fromMemory(call: Call): Resolution | undefined {
    const { core } = this
    const entry = core.memory?.get(call.key)
    if (!entry) return undefined
    const now = performance.now()
    if (now < entry.freshUntil) {
      if (core.dueForEarlyRefresh(call, entry, now)) this.refresher.refreshInBackground(call, 'refresh', entry)
      if (core.events.count('hit')) core.events.deliver('hit', { key: call.key, tier: 'l1' }) // no payload made for nobody: every L1 hit
      return { value: entry.value, outcome: 'hit', shareable: true }
    }
    if (now < entry.backoffUntil && now < entry.fallbackUntil) return core.stale(call.key, entry, 'backoff')
    if (now < entry.graceUntil) {
      // With Redis, the first call past ttl asks it first (resolve(): one GET while another
      // process's reload is already in): stale is served only while a reload is running, our
      // own (a refresh or load here) or another process's that we watch for (watchReload).
      if (core.store && !this.reloading(call.key, now)) return undefined
      this.refresher.refreshInBackground(call, 'read', entry)
      return core.stale(call.key, entry, 'grace')
    }
    return undefined
  }

  /** Is a reload of `key` under way that this process knows of (so a copy in grace may be served)? */
  private reloading(key: string, now: number): boolean {
    const { core } = this
    return now < (core.refreshHolds.get(key) ?? 0) && (core.busy(key) || core.watching.has(key))
  }

  /**
   * What to serve stale while a reload runs: Redis's copy in grace, or, when Redis has none
   * at all (flushed, evicted), this process's L1 copy if that is still in grace.
   */
  graceCopy(entry: Entry | undefined, found: Lookup, notes: FlightNotes): Entry | undefined {
    if (entry) return found.state === 'grace' ? entry : undefined
    const held = notes.fallback
    return found.state === 'miss' && held && performance.now() < held.graceUntil ? held : undefined
  }

  /** A read of the fresh copy answered: the hit, or undefined when it found nothing usable. */
  freshHit(call: Call, read: FreshRead, store: RedisStore): Resolution | undefined {
    const { core } = this
    if (core.memory || call.policy.earlyRefresh.kind !== 'off') {
      const entry = core.entries.freshEntry(call.key, read, store)
      return entry && this.hit(call, entry)
    }
    // Nothing would keep the entry (no L1, no early refresh): decode the value alone.
    const record = core.entries.freshRecord(call.key, read, store.clock.now()!)
    if (!record) return undefined
    let value: unknown
    try {
      value = decodeValue(core.settings.format, record.bytes, record.dataAt)
    } catch (error) {
      core.events.emit('corrupt', { key: call.key, error })
      return undefined
    }
    if (core.events.count('hit')) core.events.deliver('hit', { key: call.key, tier: 'redis' })
    return { value, outcome: 'hit', shareable: true }
  }

  hit(call: Call, entry: Entry): Resolution {
    const { core } = this
    if (core.memory) core.remember(call, entry)
    if (core.events.count('hit')) core.events.deliver('hit', { key: call.key, tier: 'redis' })
    if (call.policy.earlyRefresh.kind !== 'off' && core.dueForEarlyRefresh(call, entry, performance.now())) {
      // After this flight has ended, or refreshInBackground would see it and stand down.
      setImmediate(() => {
        if (core.deletions === call.epoch) this.refresher.refreshInBackground(call, 'refresh', entry) // not after a delete
      })
    }
    return { value: entry.value, outcome: 'hit', shareable: true }
  }

  /** A message on the key's channel, from the leader in another process; undefined = re-check. */
  async onLeaderMessage(
    call: Call,
    keys: EntryKeys,
    message: Buffer,
    fallback: Entry | undefined,
  ): Promise<Resolution | undefined> {
    switch (messageKind(message)) {
      case 'c':
      case 'n': {
        const entry = await this.core.entries.committedEntry(call.key, keys, message)
        if (!entry) return undefined
        this.core.remember(call, entry)
        this.core.events.emit('coalesced', { key: call.key, from: 'remote' })
        return { value: entry.value, outcome: 'coalesced', shareable: true }
      }
      case 'e':
        return this.remoteFailure(call, message.toString(), fallback)
      case 'u':
        return this.leader.loadUncached(call)
      default:
        return undefined
    }
  }

  /** `e|…` (see loader-error.ts): a load failed elsewhere. Stale if covered, else the error. */
  remoteFailure(call: Call, message: string, fallback: Entry | undefined): Resolution {
    const { name, message: remoteMessage } = decodeFailure(message)
    const error = new RemoteLoaderError(call.key, name, remoteMessage)
    if (!fallbackValid(fallback, performance.now())) throw error
    this.core.events.emit('fail-safe', { key: call.key, error })
    return this.core.stale(call.key, fallback, 'fail-safe')
  }

  /**
   * After waitTimeout: stale if we can, a LockWaitTimeoutError if asked, else undefined (load
   * it ourselves). At once past `maxPendingWaits` (`capped`): stale, else LockWaitTimeoutError,
   * never a load of our own: a budget that sends its overflow to the loader is a stampede.
   */
  waitTimedOut(call: Call, fallback: Entry | undefined, capped = false): Resolution | undefined {
    if (!capped) this.core.events.emit('timeout', { key: call.key, kind: 'wait' })
    if (fallbackValid(fallback, performance.now())) return this.core.stale(call.key, fallback, 'wait-timeout')
    if (capped) throw new LockWaitTimeoutError(call.key, 0, this.core.settings.maxPendingWaits)
    if (call.policy.onWaitTimeout === 'throw') throw new LockWaitTimeoutError(call.key, call.policy.waitTimeout)
    return undefined
  }
}
