import { InvalidArgumentError } from '../errors.js'
import { Locks } from './locks.js'
import type { LockCallOptions } from './options.js'

export interface LockedOptions<This> extends Omit<LockCallOptions, 'signal'> {
  /**
   * The `Locks` to lock with, or a function of the instance returning it. Default: the
   * instance's own `locks` property (constructor injection).
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any resource type: the decorator never touches it
  locks?: Locks<any> | ((self: This) => Locks<any>)
}

/**
 * A standard (TC39, TypeScript ≥ 5) method decorator: the method runs inside
 * `withLock(keyOf(...args), …)`, so calls with the same key never overlap across every
 * process sharing the backend. The seed's `@WithLock` + `@LockKey`, in one:
 *
 * ```ts
 * class Coupons {
 *   constructor(readonly locks: Locks) {}
 *   @locked((userId: number, couponId: number) => `coupon:${couponId}`, { wait: '2s' })
 *   async issue(userId: number, couponId: number) { … }
 * }
 * ```
 *
 * The method must return a promise. Inside it, `locks.acquire(key, { reentrant: true })`
 * gives the held lock itself (its token and signal) without waiting for it.
 */
export function locked<This, Args extends unknown[], Result>(
  keyOf: (this: This, ...args: Args) => string,
  options: LockedOptions<This> = {},
) {
  if (typeof keyOf !== 'function')
    throw new InvalidArgumentError('keyOf', `expected a function of the method's arguments, got ${typeof keyOf}`)
  const { locks: source, ...callOptions } = options
  return function decorate(
    method: (this: This, ...args: Args) => Promise<Result>,
    context: ClassMethodDecoratorContext<This, (this: This, ...args: Args) => Promise<Result>>,
  ) {
    if (context.kind !== 'method')
      throw new InvalidArgumentError(
        '@locked',
        `decorates methods, not a ${String((context as { kind: unknown }).kind)}`,
      )
    const name = String(context.name)
    return async function lockedMethod(this: This, ...args: Args): Promise<Result> {
      const locks = typeof source === 'function' ? source(this) : (source ?? (this as { locks?: unknown }).locks)
      if (!(locks instanceof Locks))
        throw new InvalidArgumentError(
          'locks',
          `@locked ${name}: give { locks } or set this.locks to a Locks from createLocks()`,
        )
      return locks.withLock(keyOf.apply(this, args), () => method.apply(this, args), callOptions)
    }
  }
}
