import type { Lookup } from './store.js'

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
