import { InvalidArgumentError } from '../errors.js'

/**
 * A bound on the bytes that captures hold at once, across every route that shares it.
 * `maxBodyBytes` bounds one response; this bounds their sum, which otherwise grows with
 * the number of concurrent misses (500 cold URLs × 900 KiB is 450 MiB of buffers before
 * any copy). A capture that cannot reserve its next chunk is released, as nginx spills
 * past `proxy_buffers`: what it buffered goes to its client and the rest streams
 * through, uncached. A capture gives its bytes back as soon as it ends.
 */
export class CaptureBudget {
  private held = 0

  constructor(readonly maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0)
      throw new InvalidArgumentError('captureBudget', `must be a non-negative integer of bytes, got ${maxBytes}`)
  }

  /** Bytes reserved by captures right now. */
  get used(): number {
    return this.held
  }

  /** Takes `bytes` if they fit; false (and nothing taken) if not. */
  reserve(bytes: number): boolean {
    if (this.held + bytes > this.maxBytes) return false
    this.held += bytes
    return true
  }

  giveBack(bytes: number): void {
    this.held = Math.max(0, this.held - bytes)
  }
}

/** The default: 64 MiB, shared by every `cacheRoute()` in the process that is not given its own. */
export const DEFAULT_CAPTURE_BUDGET_BYTES = 64 * 1024 * 1024
export const defaultCaptureBudget = new CaptureBudget(DEFAULT_CAPTURE_BUDGET_BYTES)

/** A budget to share between the routes given it: `cacheRoute(cache, { ttl, captureBudget })`. */
export function createCaptureBudget(maxBytes: number): CaptureBudget {
  return new CaptureBudget(maxBytes)
}
