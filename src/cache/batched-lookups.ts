import type { FreshRead } from './redis/fresh-reads.js'
import type { Lookup } from './redis/store.js'

/** What getOrLoadMany's batch read and looked up for its flights (see load-many.ts). */
export interface BatchedLookups {
  /** The key's fresh copy, from the batch's MGET. */
  read(key: string): Promise<FreshRead>
  /** The key's first get-or-lock answer, from the batch's script, and the owner it was asked for. */
  lookup(key: string): FirstLookup | undefined
}

/** A flight's first lookup, made for it by a batch: its owner, its answer, and whether it went unanswered. */
export interface FirstLookup {
  owner: string
  answer: Promise<Lookup>
  abandoned(): boolean
}
