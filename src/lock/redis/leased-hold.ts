import type { HeldLock } from '../backend.js'

/**
 * @internal A lock held on a Redis lease (the plain lock, the fair lock, a read-write
 * hold): the front's watchdog renews it with `renew` and detects its loss (so its own
 * `signal` never aborts), and `release` is sent once however often it is asked for.
 */
export function leasedHold(
  token: string,
  acquiredAt: number,
  renew: (leaseMs: number) => Promise<boolean>,
  release: () => Promise<void>,
): HeldLock<void> {
  let released: Promise<void> | undefined
  return {
    token: BigInt(token),
    liveness: 'lease',
    acquiredAt,
    signal: new AbortController().signal,
    resource: undefined,
    renew,
    release: () => (released ??= release()),
  }
}
