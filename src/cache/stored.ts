import { entryFrom, type Entry, type Lifetimes } from '../entry.js'
import { compressed, decodeValue, encodedSize, encodeValue } from '../stored-value.js'
import { describeFailure } from '../loader-error.js'
import { SerializationError, ValueTooLargeError } from '../errors.js'
import type { CacheEmitter } from '../events.js'
import type { MemoryTier } from '../memory/l1.js'
import type { Settings } from '../settings.js'
import type { EntryKeys } from './redis/keys.js'
import { lifetimesOf, newerVersion, parseRecord, type StoredRecord } from './redis/record.js'
import { FOREIGN_TYPE, type FreshRead } from './redis/fresh-reads.js'
import type { Lookup, RedisStore } from './redis/store.js'
import { messageKind } from './call.js'

/**
 * Entries as Redis and the key's channel carry them: a value encoded for a commit, and an
 * L1 entry decoded from a lookup, from the fresh copy, or from a leader's commit message.
 * Whatever cannot be decoded is reported (`corrupt`) and treated as absent.
 */
export class StoredEntries {
  constructor(
    private readonly settings: Settings,
    private readonly events: CacheEmitter,
    private readonly memory: MemoryTier | undefined,
    private readonly store: RedisStore | undefined,
  ) {}

  /**
   * The value as stored (compressed when the format says so); throws `SerializationError` or
   * `ValueTooLargeError` (above `maxValueBytes` before compression) when it cannot be.
   */
  encode(key: string, value: unknown): string | Buffer {
    const { format } = this.settings
    let data: string | Buffer
    try {
      data = encodeValue(format, value)
    } catch (error) {
      throw new SerializationError(key, `the codec could not encode it: ${describeFailure(error).message}`, error)
    }
    const max = format.maxValueBytes
    // Compressed only for Redis: in-process mode keeps the value itself, and encodes only to check it.
    const stored = (checked: string | Buffer) => (this.store ? compressed(format, checked) : checked)
    if (Buffer.isBuffer(data)) {
      if (data.length > max) throw new ValueTooLargeError(key, data.length, max)
      return stored(data)
    }
    // A UTF-16 unit is 1 to 3 UTF-8 bytes: count the bytes only when the length cannot tell.
    if (data.length * 3 > max) {
      if (data.length > max) throw new ValueTooLargeError(key, undefined, max)
      const bytes = Buffer.byteLength(data)
      if (bytes > max) throw new ValueTooLargeError(key, bytes, max)
    }
    return stored(data)
  }

  decode(key: string, found: Lookup): Entry | undefined {
    if (found.corrupt) this.events.emit('corrupt', { key })
    if (found.data.length === 0 || found.state === 'miss') return undefined
    return this.decodeData(key, found.data, found.life, found.version, found.sentAt)
  }

  /**
   * `fallback`, unless a lookup's `fence` shows the key was deleted after it was written (a
   * version below the fence): then undefined, and dropped from L1 if that is where it came from.
   * A process that missed the delete's broadcast would otherwise serve the deleted value as
   * fail-safe. No fence (the hash was lost with Redis) keeps it: that is what fail-safe is for.
   */
  unlessDeleted(key: string, fallback: Entry | undefined, fence: string): Entry | undefined {
    if (!fallback || fence === '' || !newerVersion(fence, fallback.version)) return fallback
    if (this.memory?.get(key) === fallback) this.memory.delete(key)
    return undefined
  }

  /** `at`: the local time `life` counts from (now, unless the lifetimes were measured earlier). */
  decodeData(key: string, data: Buffer, life: Lifetimes, version: string, at = performance.now()): Entry | undefined {
    try {
      return entryFrom(decodeValue(this.settings.format, data), life, at, version, encodedSize(data))
    } catch (error) {
      this.events.emit('corrupt', { key, error })
      return undefined
    }
  }

  /** `c|<server now>|<record>` as published by commit.lua (see redis/record.ts). */
  decodeCommitMessage(key: string, message: Buffer): Entry | undefined {
    const bar = message.indexOf('|', 2)
    // The server time it was sent at places the record's deadlines: digits, or the message is corrupt
    // (Number('') is 0 and Number('abc') NaN, with which every deadline check passes).
    const now = bar < 0 ? '' : message.toString('latin1', 2, bar)
    const record = /^\d{1,16}$/.test(now) ? parseRecord(message, bar + 1, Number(now)) : undefined
    if (!record) {
      this.events.emit('corrupt', { key })
      return undefined
    }
    // Its deadlines count from the server's time now, not from when it was published: a message
    // read late (a busy event loop) must not make L1 keep the value longer than Redis does.
    const published = Number(now)
    const life = lifetimesOf(record, Math.max(published, this.store?.clock.now() ?? published))
    return this.decodeData(key, record.data, life, record.version)
  }

  /** The value a commit message announces: carried in it ('c'), or read with one GET (a notice, 'n', for a large value). */
  async committedEntry(key: string, keys: EntryKeys, message: Buffer): Promise<Entry | undefined> {
    switch (messageKind(message)) {
      case 'c':
        return this.decodeCommitMessage(key, message)
      case 'n':
        return this.store && this.store.clock.now() !== undefined ? this.readFresh(key, keys, this.store) : undefined
      default:
        return undefined
    }
  }

  /**
   * The fresh hit: one GET of the fresh copy (see docs/architecture.md). Undefined when
   * there is none, or it is corrupt, or the server clock is not known yet: the caller
   * then asks the get-or-lock script, which decides, repairs and measures the clock.
   */
  readFresh(key: string, keys: EntryKeys, store: RedisStore): Promise<Entry | undefined> {
    return store.getFresh(keys.fresh).then((read) => this.freshEntry(key, read, store))
  }

  /** What a read of the fresh copy found, decoded; undefined when nothing (or nothing usable) was there. */
  freshEntry(key: string, read: FreshRead, store: RedisStore): Entry | undefined {
    const serverNow = store.clock.now()!
    const record = this.freshRecord(key, read, serverNow)
    if (!record) return undefined
    // Redis returned it, so it is fresh by the server clock, whatever our estimate of that says.
    // Nor fresher than its own ttl.
    const life = lifetimesOf(record, serverNow)
    life.freshMs = Math.max(0, life.ttlMs > 0 ? Math.min(life.freshMs, life.ttlMs) : life.freshMs)
    return this.decodeData(key, record.data, life, record.version)
  }

  /** The record a read of the fresh copy found; undefined when none, or a corrupt one (reported). */
  freshRecord(key: string, read: FreshRead, serverNow: number): StoredRecord | undefined {
    if (read === null) return undefined
    const record = read === FOREIGN_TYPE ? undefined : parseRecord(read, 0, serverNow)
    if (!record) this.events.emit('corrupt', { key })
    return record
  }
}
