import type { Flight } from '../memory/single-flight.js'
import type { PolicyOptions } from '../options.js'
import type { Answers } from './answers.js'
import { type Call, type FlightNotes, type Resolution, newFlightNotes } from './call.js'
import type { CacheCore } from './core.js'
import type { LoadLeader } from './lead.js'
import type { Resolver } from './resolve.js'
import type { CallerTimeouts } from './timeouts.js'

/**
 * One request's way to its answer: L1, else the key's flight in this process (started,
 * joined, or, for a forced refresh, waited out and replaced), each caller with its own
 * timeouts racing the flight while the flight itself runs on.
 */
export class KeyFlights {
  /** Flights of forced refreshes (forceRefresh), which other forced calls of the key join. */
  readonly #forced = new WeakSet<Promise<Resolution>>()

  constructor(
    private readonly core: CacheCore,
    private readonly leader: LoadLeader,
    private readonly answers: Answers,
    private readonly timeouts: CallerTimeouts,
    private readonly resolver: Resolver,
  ) {}

  /** A resolution straight from L1 (synchronous), or the flight's promise. */
  answer(key: string, loader: unknown, options: PolicyOptions | undefined): Resolution | Promise<Resolution> {
    let call: Call
    try {
      call = this.core.call(key, loader, options)
    } catch (error) {
      return Promise.reject(error)
    }
    if (call.force) return this.#forceFly(call)
    return this.answers.fromMemory(call) ?? this.fly(call)
  }

  /** Starts the key's flight, or joins the one running, each caller with its own timeouts. */
  fly(call: Call): Promise<Resolution> {
    const core = this.core
    const running = core.flights.get(call.key)
    if (!running)
      return this.timeouts.withTimeouts(
        call,
        core.flights.start(call.key, newFlightNotes(), (notes) => this.resolver.resolve(call, notes)),
        false,
      )
    return this.#join(call, running)
  }

  /**
   * A forced refresh: joins the key's forced flight here if one runs; after any other flight
   * of the key (which may serve the value being replaced) is done, starts one of its own.
   */
  #forceFly(call: Call): Promise<Resolution> {
    const core = this.core
    const running = core.flights.get(call.key)
    if (running && this.#forced.has(running.promise)) return this.#join(call, running)
    if (running) {
      const again = () => this.#forceFly(call)
      return running.promise.then(again, again)
    }
    const flight = core.flights.start(call.key, newFlightNotes(), (notes) => this.resolver.resolve(call, notes))
    this.#forced.add(flight.promise)
    return this.timeouts.withTimeouts(call, flight, false)
  }

  /** Joins the key's running flight, with the caller's own timeouts. */
  #join(call: Call, running: Flight<Resolution, FlightNotes>): Promise<Resolution> {
    const core = this.core
    const startedAt = performance.now()
    core.events.emit('coalesced', { key: call.key, from: 'process' })
    return this.timeouts.withTimeouts(call, running, true).then((resolution) => {
      // Loaded before an invalidation of one of its tags: a caller may have joined after it (deleteByTag resolved). Ask again, as a call begun now.
      const under = resolution.loadedUnder
      if (under && core.tagIndex.invalidatedSince(under.tags, under.epoch))
        return this.fly({ ...call, epoch: core.deletions })
      if (!resolution.shareable) return this.leader.loadUncached(call, startedAt)
      return resolution.outcome === 'loaded' ? { ...resolution, outcome: 'coalesced' } : resolution
    })
  }
}
