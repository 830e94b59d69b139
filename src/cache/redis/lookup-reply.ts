import type { Lifetimes } from '../../entry.js'

/** What getOrLock found. `data` is '' when there is no usable value. */
export interface Lookup {
  state: 'fresh' | 'grace' | 'fallback' | 'miss'
  lock: 'none' | 'won' | 'held' | 'backoff' | 'pass' | 'token' | 'error'
  /** Token when won/token; ms left when held/backoff/pass/error. */
  lockArg: string
  /** Bytes, as stored (see encodeValue): a BinaryValue's payload must not go through UTF-8. */
  data: Buffer
  life: Lifetimes
  corrupt: boolean
  /** Fencing token the value was written with ('' for none): a larger one is a newer value. */
  version: string
  /**
   * The entry's fence `f`, in every state: the last value's version, or what a delete raised
   * above every token before it. '' when Redis holds none (never written, or lost): a fallback
   * older than it was deleted, not lost (see StoredEntries.unlessDeleted).
   */
  fence: string
  /** With a replica wait: how many replicas acknowledged the lookup's writes (the lock). */
  acknowledged?: number
  /** The server time (ms) the lookup ran at: a load it elects begins no earlier (tags compare it). */
  serverNow: number
  /**
   * `performance.now()` when it was sent, after any wait for a `redisCommands` slot: a lock it
   * took has its lease counted from no earlier. (From before that wait, 20,000 lookups queued
   * at once outlasted the lease: 9,056 leaders were told at once that they had lost their lock.)
   */
  sentAt: number
}

/** One get-or-lock reply as the Buffer variant returns it (get-or-lock.lua's header lists the fields). */
export type LookupReply = [
  Buffer,
  Buffer,
  Buffer,
  Buffer,
  number,
  number,
  number,
  number,
  number,
  number,
  Buffer,
  Buffer,
  Buffer,
]

/** A get-or-lock reply (of get-or-lock.lua, or one entry's of get-or-lock-many.lua) as a `Lookup`. */
export function lookupFrom(reply: LookupReply, sentAt: number, acknowledged?: number): Lookup {
  const [state, lock, lockArg, data, freshMs, graceMs, fallbackMs, loadMs, corrupt, ttlMs, now, version, fence] = reply
  return {
    state: String(state) as Lookup['state'],
    lock: String(lock) as Lookup['lock'],
    lockArg: String(lockArg),
    data,
    life: { freshMs, graceMs, fallbackMs, loadMs, ttlMs: ttlMs || freshMs },
    corrupt: corrupt === 1,
    version: String(version),
    fence: String(fence),
    acknowledged,
    serverNow: Number(String(now)),
    sentAt,
  }
}
