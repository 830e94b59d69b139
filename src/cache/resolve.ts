import { fallbackValid } from '../entry.js'
import { freshKeyOf } from './redis/keys.js'
import type { Answers } from './answers.js'
import { type Call, type FlightNotes, type Resolution } from './call.js'
import type { CacheCore } from './core.js'
import type { LoadLeader } from './lead.js'
import type { Refresher } from './refresh.js'
import type { BatchedLookups } from './batched-lookups.js'
import { RedisFlight } from './redis-flight.js'

/** Resolving one flight through the tiers: L1's copy as fallback, the fresh GET, then the get-or-lock script. */
export class Resolver {
  constructor(
    readonly core: CacheCore,
    readonly leader: LoadLeader,
    readonly refresher: Refresher,
    readonly answers: Answers,
  ) {}

  /**
   * One flight: decide from Redis who loads, then lead, wait, or serve. The fresh hit comes
   * first and takes no await, no timer and no closure beyond its one reaction (it is most
   * calls' whole path): the GET is sent in this tick's batch, and only when it finds nothing
   * (or fails) does the flight go on to the script (RedisFlight).
   */
  resolve(call: Call, notes: FlightNotes): Promise<Resolution> {
    const { core } = this
    /** L1 held a copy whose ttl has passed (then Redis's fresh copy has ended too, unless reloaded elsewhere). */
    let pastTtl = false
    if (core.memory) {
      const inMemory = core.memory.get(call.key)
      const now = performance.now()
      if (fallbackValid(inMemory, now)) notes.fallback = inMemory
      pastTtl = inMemory !== undefined && now >= inMemory.freshUntil
    }
    const store = core.store
    if (!store) {
      core.events.emit('miss', { key: call.key }) // in-process mode: L1 was the only tier
      return this.leader.lead(call, undefined, notes)
    }
    // Whichever command goes first is sent before this returns, so calls keep their order.
    if (store.clock.stale()) void store.syncClock()
    // The first lookup is the fresh GET and, when it finds nothing, the script: joined
    // callers' waitTimeouts start once it answers (see withTimeouts in timeouts.ts).
    notes.lookingUp ??= true
    // A forced refresh skips the fresh copy: it takes the lock even from a fresh value. So does
    // a call whose L1 copy is past its ttl: L1 never outlives Redis's copy, so the fresh GET
    // finds nothing unless another process reloaded meanwhile, and the script answers that case
    // too (state 'fresh', with the value): one round trip to the grace copy or the lock, not two.
    if (!store.clock.known() || call.force || pastTtl) return new RedisFlight(this, store, call, notes).run(undefined)
    const outer = this // methods, not arrow properties: tsx names each arrow property it creates, per call
    return new Promise<Resolution>((resolve, reject) =>
      store.readFresh({
        freshKey: freshKeyOf(core.settings.namespace, call.key),
        // The flight settles this promise itself: no second promise chained to it while it waits.
        found(found) {
          try {
            const hit = outer.answers.freshHit(call, found, store)
            if (hit) resolve(hit)
            else new RedisFlight(outer, store, call, notes).start(undefined, resolve)
          } catch (error) {
            reject(error)
          }
        },
        failed(error) {
          new RedisFlight(outer, store, call, notes).start(Promise.reject(error), resolve)
        },
      }),
    )
  }

  /**
   * One flight of getOrLoadMany (load-many.ts): as resolve(), but its fresh read is the batch's
   * MGET and its first lookup the batch's get-or-lock-many call (`batch.lookup`, undefined for a
   * key the batch did not look up: the flight sends its own).
   */
  resolveBatched(call: Call, notes: FlightNotes, batch: BatchedLookups): Promise<Resolution> {
    const { core } = this
    const store = core.store!
    if (core.memory) {
      const inMemory = core.memory.get(call.key)
      if (fallbackValid(inMemory, performance.now())) notes.fallback = inMemory
    }
    notes.lookingUp ??= true
    return batch.read(call.key).then(
      (found) =>
        this.answers.freshHit(call, found, store) ??
        new RedisFlight(this, store, call, notes, batch.lookup(call.key)).run(undefined),
      (error: unknown) => new RedisFlight(this, store, call, notes).run(Promise.reject(error)),
    )
  }
}
