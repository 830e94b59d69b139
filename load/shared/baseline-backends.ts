/**
 * The baselines the lock is compared against, as `LockBackend`s, so every contender runs
 * the very same critical section (examples/coupon-issue.ts `issueCoupon`):
 *
 * - `SpinLockBackend`: the seed articles' lock. `SET key owner NX PX lease`; when busy,
 *   sleep 100 ms and try again, up to a retry limit; compare-and-delete to release. No
 *   renewal, no fencing token, no wake-up: a waiter notices a release at its next poll.
 * - `NoLockBackend`: grants every request at once. What the code does without a lock.
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import type { AcquireRequest, HeldLock, LockBackend } from '../../src/lock/backend.js'

const NEVER = new AbortController().signal
const COMPARE_AND_DELETE =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"

export class SpinLockBackend implements LockBackend {
  readonly name = 'spin-lock'

  constructor(
    private readonly redis: Redis,
    private readonly namespace: string,
    readonly pollMs = 100,
    readonly maxRetries = 50,
  ) {}

  async acquire(request: AcquireRequest): Promise<HeldLock | undefined> {
    const key = `${this.namespace}:${request.key}`
    const owner = randomBytes(8).toString('hex')
    for (let attempt = 0; ; attempt++) {
      if ((await this.redis.set(key, owner, 'PX', request.leaseMs, 'NX')) === 'OK') {
        return {
          token: undefined,
          liveness: 'session', // the seed has no watchdog: nothing renews it
          signal: NEVER,
          resource: undefined,
          renew: async () => true,
          release: async () => {
            await this.redis.eval(COMPARE_AND_DELETE, 1, key, owner)
          },
        }
      }
      if (attempt >= this.maxRetries || request.waitMs === 0 || request.signal.aborted) return undefined
      await sleep(this.pollMs)
    }
  }

  async close(): Promise<void> {}
}

export class NoLockBackend implements LockBackend {
  readonly name = 'no-lock'

  async acquire(): Promise<HeldLock> {
    return {
      token: undefined,
      liveness: 'session',
      signal: NEVER,
      resource: undefined,
      renew: async () => true,
      release: async () => {},
    }
  }

  async close(): Promise<void> {}
}
