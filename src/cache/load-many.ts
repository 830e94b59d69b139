import { newOwnerId } from './owner-ids.js'
import type { Loader } from '../context.js'
import { CacheClosedError, InvalidArgumentError } from '../errors.js'
import type { CallOptions } from '../options.js'
import { batchesOf } from '../redis/batches.js'
import type { Answers } from './answers.js'
import { BatchLoads, type BatchLoader } from './batch-loads.js'
import { type Call, type Resolution, newFlightNotes } from './call.js'
import type { CacheCore } from './core.js'
import type { FreshRead } from './redis/fresh-reads.js'
import { entryKeys, type EntryKeys } from './redis/keys.js'
import type { Lookup, RedisStore } from './redis/store.js'
import type { BatchedLookups, FirstLookup } from './batched-lookups.js'
import type { Resolver } from './resolve.js'
import type { CallerTimeouts } from './timeouts.js'

/** Most keys one `getOrLoadMany` call takes (a bigger array: `InvalidArgumentError`). */
export const MAX_KEYS_PER_CALL = 10_000
/** Most keys in one MGET: a call of more keys sends several. */
const MAX_KEYS_PER_READ = 1_000
/**
 * Most keys in one get-or-lock-many.lua call (more are sent as several calls): the script
 * blocks Redis while it runs, about 30 µs a key measured on a busy 2-core machine.
 */
const MAX_KEYS_PER_SCRIPT = 200

/** The keys of `batch` whose lookup took the lock. */
function wonKeys(batch: readonly EntryKeys[], found: readonly Lookup[]): string[] {
  return batch.filter((_, i) => found[i]?.lock === 'won').map((names) => names.key)
}

/** What getOrLoadMany needs of the cache's parts. */
export interface ManyParts {
  core: CacheCore
  answers: Answers
  resolver: Resolver
  timeouts: CallerTimeouts
  /** Starts the key's flight, or joins the one running (Cache#fly). */
  fly(call: Call): Promise<Resolution>
}

/** One key's outcome in `getOrLoadMany`'s result: its value, or why it has none. */
export type ManyResult<V> = PromiseSettledResult<V>

/**
 * `cache.getOrLoadMany`: the keys' values, each by the path `getOrLoad` takes, with the Redis
 * round trips of the whole batch shared (one MGET of the fresh copies and one
 * get-or-lock-many.lua call per slot, at most MAX_KEYS_PER_READ and MAX_KEYS_PER_SCRIPT keys each) and the loads
 * this process is elected for gathered into batch-loader calls (batch-loads.ts). Rejects only
 * on bad input; each key's failure is its entry's `rejected` result.
 */
export async function getOrLoadMany<V>(
  parts: ManyParts,
  keys: readonly string[],
  batchLoader: BatchLoader<V>,
  options: CallOptions | undefined,
): Promise<Map<string, ManyResult<V>>> {
  const { core } = parts
  const order = new Map<string, number>()
  const loads = new BatchLoads(batchLoader, order)
  const calls = checkedCalls(core, keys, batchLoader, options, (context) => loads.load(context.key, context))
  calls.forEach((call, i) => order.set(call.key, i))
  const answers = new Map<string, Promise<Resolution>>()
  const toLookUp: Call[] = []
  for (const call of calls) {
    const inMemory = parts.answers.fromMemory(call)
    if (inMemory) answers.set(call.key, Promise.resolve(inMemory))
    // A flight of the key running here already (joined), no Redis, or a replica wait after each lookup: getOrLoad's own way.
    else if (!core.store || core.flights.get(call.key) || core.settings.lock.waitForReplicas)
      answers.set(call.key, parts.fly(call))
    else toLookUp.push(call)
  }
  if (toLookUp.length > 0) {
    const lookups = new ManyLookups(core, core.store!, toLookUp, loads)
    for (const call of toLookUp) {
      const flight = core.flights.start(call.key, newFlightNotes(), (notes) =>
        parts.resolver.resolveBatched(call, notes, lookups),
      )
      answers.set(call.key, parts.timeouts.withTimeouts(call, flight, false))
    }
  }
  const settled = await Promise.allSettled(calls.map((call) => answers.get(call.key)!))
  const results = new Map<string, ManyResult<V>>()
  calls.forEach((call, i) => {
    const outcome = settled[i]!
    results.set(
      call.key,
      outcome.status === 'fulfilled' ? { status: 'fulfilled', value: outcome.value.value as V } : outcome,
    )
  })
  return results
}

/** The keys as calls, each checked as getOrLoad checks its key (bad input rejects the whole call, before anything is sent). */
function checkedCalls(
  core: CacheCore,
  keys: readonly string[],
  batchLoader: unknown,
  options: CallOptions | undefined,
  loader: Loader<unknown>,
): Call[] {
  if (core.closed) throw new CacheClosedError()
  if (!Array.isArray(keys)) throw new InvalidArgumentError('keys', `must be an array of keys, got ${typeof keys}`)
  if (keys.length === 0) throw new InvalidArgumentError('keys', 'must hold at least one key')
  if (keys.length > MAX_KEYS_PER_CALL)
    throw new InvalidArgumentError('keys', `holds ${keys.length} keys; the most one call takes is ${MAX_KEYS_PER_CALL}`)
  if (typeof batchLoader !== 'function')
    throw new InvalidArgumentError('batchLoader', `must be a function, got ${typeof batchLoader}`)
  if (options?.forceRefresh) throw new InvalidArgumentError('forceRefresh', 'is not supported by getOrLoadMany')
  const seen = new Set<string>()
  return keys.map((key, i) => {
    let call: Call
    try {
      call = core.call(key, loader, options)
    } catch (error) {
      if (error instanceof InvalidArgumentError && error.argument === 'key')
        throw new InvalidArgumentError(`keys[${i}]`, error.message.slice('key: '.length))
      throw error
    }
    if (seen.has(key)) throw new InvalidArgumentError(`keys[${i}]`, `"${key}" is listed twice`)
    seen.add(key)
    return call
  })
}

/**
 * The Redis side of one getOrLoadMany: the fresh copies of its keys read by MGET, then the
 * keys none was found for looked up together by get-or-lock-many.lua, both per slot. Each
 * key's flight takes its read and its lookup from here (Resolver.resolveBatched); a key whose
 * lookup won the lock is expected by the batch's loads (BatchLoads.decided).
 */
class ManyLookups implements BatchedLookups {
  private readonly reads: Promise<Map<string, FreshRead>>
  private readonly lookups = new Map<string, FirstLookup>()

  constructor(
    private readonly core: CacheCore,
    private readonly store: RedisStore,
    calls: readonly Call[],
    private readonly loads: BatchLoads<unknown>,
  ) {
    const keys = calls.map((call) => entryKeys(core.settings.namespace, call.key))
    this.reads = this.readAll(keys).then((found) => {
      this.lookUp(keys.filter((names) => !found.get(names.key)))
      return found
    })
    this.reads.catch(() => {}) // each flight handles the failure (its read is tried again alone)
  }

  read(key: string): Promise<FreshRead> {
    return this.reads.then((found) => found.get(key) ?? null)
  }

  lookup(key: string): FirstLookup | undefined {
    return this.lookups.get(key)
  }

  /** The fresh copies, by key (none read while the server clock is unknown: their deadlines could not be placed). */
  private async readAll(keys: EntryKeys[]): Promise<Map<string, FreshRead>> {
    const { store } = this
    const found = new Map<string, FreshRead>()
    if (!store.clock.known()) await store.syncClock()
    if (!store.clock.known()) return found
    await Promise.all(
      this.batches(keys, MAX_KEYS_PER_READ, (names) => names.fresh).map(async (batch) => {
        const reads = await store.readFreshMany(batch.map((names) => names.fresh))
        batch.forEach((names, i) => found.set(names.key, reads[i] ?? null))
      }),
    )
    return found
  }

  /** One get-or-lock-many.lua call per batch; each key's share of its answer is its flight's first lookup. */
  private lookUp(keys: EntryKeys[]): void {
    const { lease } = this.core.settings.lock
    for (const batch of this.batches(keys, MAX_KEYS_PER_SCRIPT, (names) => names.entry)) {
      const entries = batch.map((names) => ({ keys: names, owner: newOwnerId() }))
      let abandoned = false
      this.loads.lookingUp(batch.length)
      const answers = this.store.getOrLockMany(entries, lease, this.core.retentionMs, () => (abandoned = true))
      // Before each key's flight sees its answer: the keys that won are expected to ask for their loads.
      answers.then(
        (found) => this.loads.decided(batch.length, wonKeys(batch, found)),
        () => this.loads.decided(batch.length, []),
      )
      entries.forEach(({ keys: names, owner }, i) => {
        const answer = answers.then((found) => this.answered(names.key, found[i]))
        answer.catch(() => {}) // the flight retries it alone
        this.lookups.set(names.key, { owner, answer, abandoned: () => abandoned })
      })
    }
  }

  private answered(key: string, found: Lookup | undefined): Lookup {
    if (!found) throw new Error(`get-or-lock-many.lua gave no answer for "${key}"`)
    return found
  }

  /** `keys` in batches of at most `max`, each of one slot on a Cluster. */
  private batches(keys: EntryKeys[], max: number, nameOf: (names: EntryKeys) => string): EntryKeys[][] {
    const clusterKeyOf = this.store.clusterKeyOf
    return batchesOf(keys, max, clusterKeyOf && ((names) => clusterKeyOf(nameOf(names))))
  }
}
