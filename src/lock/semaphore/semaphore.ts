import { InvalidArgumentError, LockBusyError } from '../../errors.js'
import type { HeldLockHandle, LockContext, LockHandle } from '../handle.js'
import type { HeldPermits, SemaphoreStore } from './contract.js'
import {
  parseSemaphoreCall,
  type SemaphoreCall,
  type SemaphoreCallOptions,
  type SemaphoreSettings,
  type WithPermitOptions,
} from './options.js'

/** What a permit holder gets: `withPermit`'s callback argument, and the core of a held permit. */
export interface PermitContext extends LockContext<void> {
  /** How many permits this holder has. */
  readonly count: number
  /**
   * One fencing token per permit, ascending: strictly increasing across every acquisition of
   * this semaphore, never repeated. `token` is the first. A resource admitting N writers
   * can refuse one whose permit expired by keeping, per permit slot it hands out, the
   * highest token it has seen.
   */
  readonly tokens: readonly bigint[]
}

/**
 * Held permits, from `acquire`/`tryAcquire`: `await using held = await sem.acquire()` gives
 * them back when the block exits. `release()` rejects with `LockLostError` when any of them
 * had expired before it (someone else may have had it): lost, not released.
 */
export interface HeldPermitsHandle extends PermitContext, HeldLockHandle<void> {}

/** The front's one way to hold something: `Locks`' own acquisition path (events, watchdog, close). */
export type TakeHandle = (
  name: string,
  call: SemaphoreCall,
  acquire: (waitMs: number, signal: AbortSignal) => Promise<HeldPermits | undefined>,
) => Promise<LockHandle<void> | undefined>

/**
 * A counting semaphore (`locks.semaphore(name, { permits })`): at most `permits` permits
 * held at once across every process sharing the store, each leased and renewed by the
 * watchdog like a lock, taken in FIFO order (a request for many is not starved by a
 * stream of small ones). Bad input throws `InvalidArgumentError` before anything is sent.
 */
export class Semaphore {
  constructor(
    private readonly settings: SemaphoreSettings,
    private readonly store: SemaphoreStore,
    private readonly take: TakeHandle,
  ) {}

  /** The semaphore's name. */
  get name(): string {
    return this.settings.name
  }

  /** Its size. */
  get permits(): number {
    return this.settings.permits
  }

  /** Takes `count` permits (default 1), waiting in line up to `wait`; then `LockBusyError`. */
  async acquire(count = 1, options?: SemaphoreCallOptions): Promise<HeldPermitsHandle> {
    const call = parseSemaphoreCall(count, options, this.settings, true)
    const held = await this.hold(call)
    if (!held) throw new LockBusyError(this.settings.name, call.waitMs)
    return held
  }

  /** One attempt, no waiting and no place in line: the permits, or `undefined` when not free (or others wait first). */
  tryAcquire(count = 1, options?: Omit<SemaphoreCallOptions, 'wait'>): Promise<HeldPermitsHandle | undefined> {
    return this.hold(parseSemaphoreCall(count, options, this.settings, false))
  }

  /**
   * Runs `fn` holding `count` permits (default 1), and gives them back when `fn` settles.
   * Rejects with `fn`'s error; with `LockLostError` if the permits were lost before `fn`
   * settled (checked with `assertHeld()`) or had expired at the release; with the backend's
   * error if the release could not be sent.
   */
  async withPermit<T>(fn: (permit: PermitContext) => T | Promise<T>, options?: WithPermitOptions): Promise<T> {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', `expected a function, got ${typeof fn}`)
    const { count = 1, ...rest } = (options ?? {}) as WithPermitOptions
    const call = parseSemaphoreCall(count, options === undefined ? undefined : rest, this.settings, true)
    const held = await this.hold(call)
    if (!held) throw new LockBusyError(this.settings.name, call.waitMs) // unreachable: a wait that ran out throws
    let result: T
    try {
      result = await fn(held)
      held.assertHeld()
    } catch (error) {
      await held.release().catch(() => {})
      throw error
    }
    await held.release()
    return result
  }

  private async hold(call: SemaphoreCall): Promise<HeldPermitsHandle | undefined> {
    let tokens: readonly bigint[] = []
    const handle = await this.take(this.settings.name, call, async (waitMs, signal) => {
      const held = await this.store.acquire({
        ...this.settings,
        count: call.count,
        leaseMs: call.leaseMs,
        waitMs,
        signal,
      })
      tokens = held?.tokens ?? []
      return held
    })
    return handle && permitsOf(handle, call.count, tokens)
  }
}

function permitsOf(handle: LockHandle<void>, count: number, tokens: readonly bigint[]): HeldPermitsHandle {
  return {
    key: handle.key,
    count,
    tokens,
    token: tokens[0]!,
    signal: handle.signal,
    resource: undefined,
    get validForMs() {
      return handle.validForMs
    },
    assertHeld: () => handle.assertHeld(),
    extend: (lease) => handle.extend(lease),
    release: () => handle.release(),
    [Symbol.asyncDispose]: () => handle.release(),
  }
}
