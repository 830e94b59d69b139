/**
 * An estimate of the Redis server clock, from the server times that scripts return.
 *
 * Redis decides freshness by its own clock: a fresh copy exists exactly while it is
 * fresh (its PX). The deadlines in a fresh copy are server times, and turning them into
 * the local deadlines L1 and early refresh use needs the server's "now": this estimate,
 * taken as the middle of a round trip (error ≤ half a round trip), on the monotonic clock.
 */
export class ServerClock {
  /** Server ms minus local ms (performance.timeOrigin + performance.now()). */
  private offset: number | undefined
  private observedAt = -Infinity
  /** The round trip of the sample in use: its error is at most half of it. */
  private roundTripMs = Infinity

  /** How long an estimate is trusted before it is measured again (monotonic clocks drift slowly). */
  static readonly MAX_AGE_MS = 60_000

  /** A server time `serverMs` read by a command sent at `sentAt` and answered at `receivedAt` (performance.now()). */
  observe(serverMs: number, sentAt: number, receivedAt: number): void {
    if (!Number.isFinite(serverMs)) return
    // A reply read late (behind a busy event loop, or a stalled server) is off by half its wait:
    // it must not replace a closer sample. Lagging by 500 ms, it let L1 serve a copy 500 ms
    // after Redis's had expired (test/cache/attack-hit-path.test.ts). Until the sample is stale.
    const roundTripMs = receivedAt - sentAt
    if (roundTripMs > 2 * this.roundTripMs + 1 && !this.stale()) return
    this.roundTripMs = roundTripMs
    this.offset = serverMs - (performance.timeOrigin + (sentAt + receivedAt) / 2)
    this.observedAt = receivedAt
  }

  /** The server time now, or undefined before any observation. */
  now(): number | undefined {
    return this.offset === undefined ? undefined : performance.timeOrigin + performance.now() + this.offset
  }

  /** Has the server time been observed yet? */
  known(): boolean {
    return this.offset !== undefined
  }

  /** Should the estimate be measured again? */
  stale(): boolean {
    return performance.now() - this.observedAt > ServerClock.MAX_AGE_MS
  }
}
